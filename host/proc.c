/*
 * proc.c - who a process is and whether it is still there, from /proc.
 *
 * A rank records its pid and its start time when it claims its place in a
 * segment (shm.c); a peer that waits for it (sync.c), or a rank sweeping
 * stale segments (shm.c), asks whether that process is gone.  The start
 * time tells a process from a later one that got the same pid.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

/* Start time (clock ticks since boot) of a process and its state letter;
 * 0 when the process does not exist. */
uint64_t n4p_proc_starttime(pid_t pid, char *state)
{
    char path[64], buf[1024];
    /* A process reads its own through its main thread's entry: a user-mode
     * emulator (qemu-user, which runs other architectures' wheels and
     * tests) answers /proc/self/stat and /proc/<own pid>/stat itself, with
     * another start time than the kernel gives the peers that check it. */
    if (pid == getpid())
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)pid);
    else
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    p++;
    /* Fields after the command: state is field 3, starttime field 22. */
    unsigned long long start = 0;
    char st = '?';
    int field = 3;
    char *save = NULL;
    for (char *tok = strtok_r(p, " ", &save); tok != NULL;
         tok = strtok_r(NULL, " ", &save), field++) {
        if (field == 3)
            st = tok[0];
        if (field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    }
    if (state != NULL)
        *state = st;
    return start ? (uint64_t)start : 1;
}

/* Is the process that registered as (pid, starttime) gone?  A zombie, or a
 * different process now owning the pid, counts as gone. */
bool n4p_process_gone(int32_t pid, uint64_t starttime)
{
    if (pid <= 0 || (pid_t)pid == getpid())
        return false;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return true;
    char state = '?';
    uint64_t st = n4p_proc_starttime((pid_t)pid, &state);
    if (st == 0)
        return n4p_proc_starttime(getpid(), NULL) != 0; /* no /proc: alive */
    if (state == 'Z' || state == 'X')
        return true;
    return starttime > 1 && st > 1 && st != starttime;
}
