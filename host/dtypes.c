/*
 * dtypes.c - element sizes and names of the data types.  The conversions
 * of the 16- and 8-bit floats are in lowp.h (one element) and
 * lowp_kernels.h (blocks).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include "internal.h"

/* Sizes and names from the table of data types (src/dtypes.def). */
static const size_t dtype_sizes[ncclNumTypes] = {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) [value] = size,
#include "dtypes.def"
};

static const char *const dtype_names[ncclNumTypes] = {
#define N4P_DTYPE(Name, value, size, array_name, dl_code, kernel) [value] = #array_name,
#include "dtypes.def"
};

size_t n4p_dtype_size(int dtype)
{
    if (dtype < 0 || dtype >= ncclNumTypes)
        return 0;
    return dtype_sizes[dtype];
}

const char *n4p_dtype_name(int dtype)
{
    if (dtype < 0 || dtype >= ncclNumTypes)
        return "invalid";
    return dtype_names[dtype];
}
