/*
 * log.c - what the backend prints, always on stderr, one write() per line.
 *
 * n4p_say() prints "nccl4py host: ..." lines that need no NCCL_DEBUG: the
 * report of a call blocked for long (sync.c) and configuration warnings.
 * n4p_log() prints NCCL-style lines when NCCL_DEBUG asks for them:
 * "host:pid:tid [dev] NCCL WARN ..." for every error and
 * "host:pid:tid [dev] NCCL INFO ..." for communicator life-cycle events.
 * The version line ("NCCL version X.Y.Z+nccl4py.host") comes once per
 * process, at the first communicator, from level VERSION up.  (NCCL writes
 * to stdout by default; stderr keeps a program's own output clean.)
 *
 * NCCL_DEBUG belongs to NCCL: as NCCL does, an unknown value is ignored
 * (with one warning line) rather than failing; it is read once per process,
 * on first use, since errors may be reported before any communicator exists.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getrandom, syscall, strtok_r, ... */
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define LINE 1024

static char host[64] = "localhost";
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void host_init(void)
{
    char h[sizeof host];
    if (gethostname(h, sizeof h) != 0)
        return;
    h[sizeof h - 1] = '\0';
    h[strcspn(h, ".")] = '\0';
    memcpy(host, h, sizeof h);
}

static void put_line(char *buf, size_t len)
{
    if (len > LINE - 2)
        len = LINE - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w; /* nothing sensible to do when stderr is gone */
}

void n4p_say(const char *fmt, ...)
{
    char buf[LINE];
    int n = snprintf(buf, sizeof buf, "nccl4py host: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    put_line(buf, (size_t)n + (m > 0 ? (size_t)m : 0));
}

/* ---------------------------------------------------------- NCCL_DEBUG -- */

static const char *const levels[] = {"VERSION", "WARN", "INFO", "ABORT", "TRACE"};
static int debug_level;
static pthread_once_t debug_once = PTHREAD_ONCE_INIT;

/* Does s equal the upper-case word `upper`, ignoring ASCII case (never the
 * locale's)? */
static bool word_is(const char *s, const char *upper)
{
    size_t i = 0;
    for (; s[i] != '\0' && upper[i] != '\0'; i++) {
        char c = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
        if (c != upper[i])
            return false;
    }
    return s[i] == '\0' && upper[i] == '\0';
}

static void debug_init(void)
{
    const char *s = getenv("NCCL_DEBUG");
    if (s == NULL || *s == '\0')
        return;
    for (int i = 0; i < (int)(sizeof levels / sizeof levels[0]); i++)
        if (word_is(s, levels[i])) {
            debug_level = N4P_LOG_VERSION + i;
            return;
        }
    n4p_say("NCCL_DEBUG=%.64s is not one of VERSION, WARN, INFO, ABORT, TRACE; ignored", s);
}

int n4p_debug_level(void)
{
    pthread_once(&debug_once, debug_init);
    return debug_level;
}

/* ------------------------------------------------------------- lines -- */

static void version_line(void)
{
    int v = NCCL4PY_ABI_VERSION_CODE;
    char buf[LINE];
    int n = snprintf(buf, sizeof buf, "NCCL version %d.%d.%d+nccl4py.host", v / 10000,
                     v / 100 % 100, v % 100);
    put_line(buf, (size_t)n);
}

void n4p_log_version(void)
{
    if (n4p_debug_level() >= N4P_LOG_VERSION)
        pthread_once(&version_once, version_line);
}

void n4p_log(int level, ncclComm_t comm, const char *fmt, ...)
{
    if (n4p_debug_level() < level)
        return;
    pthread_once(&host_once, host_init);
    char buf[LINE];
    int dev = comm != NULL && comm->magic == N4P_COMM_MAGIC ? comm->device : 0;
    int n = snprintf(buf, sizeof buf, "%s:%d:%ld [%d] NCCL %s ", host, (int)getpid(),
                     (long)syscall(SYS_gettid), dev, level == N4P_LOG_WARN ? "WARN" : "INFO");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    put_line(buf, (size_t)n + (m > 0 ? (size_t)m : 0));
}
