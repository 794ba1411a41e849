/*
 * dtypes.c - element sizes and names of the data types, from the one table
 * of them (src/gen/dtype_table.h, which the extension reads too).  The
 * conversions of the 16- and 8-bit floats are in lowp.h (one element) and
 * lowp_kernels.h (blocks).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include "internal.h"

#include "gen/dtype_table.h"

size_t n4p_dtype_size(int dtype)
{
    const n4p_dtype_row *r = n4p_dtype_row_of(dtype);
    return r != NULL ? r->size : 0;
}

/* The name messages give it: its array name (docs/semantics.md). */
const char *n4p_dtype_name(int dtype)
{
    const n4p_dtype_row *r = n4p_dtype_row_of(dtype);
    return r != NULL ? r->array_name : "invalid";
}
