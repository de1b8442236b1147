/* Races a fenced connect: the supervisor must decide and act on one copy.
 *   race dup2 N PATH      a thread dup2()s an AF_INET and an AF_UNIX socket onto the
 *                         connecting fd, over and over, while PATH is connected N times
 *   race flip N PATH      a thread flips the address's first byte between NUL (an
 *                         abstract name) and '/' (the path PATH) while it is connected
 * Prints "reached=<connects that succeeded> tries=<N>". */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#define SLOT 200
static atomic_int unix_fd = -1, inet_fd = -1, stop;
static struct sockaddr_un addr;

static void *swap_fds(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        dup2(atomic_load(&inet_fd), SLOT);
        dup2(atomic_load(&unix_fd), SLOT);
    }
    return NULL;
}

static void *flip_byte(void *arg) {
    volatile char *first = addr.sun_path;
    (void)arg;
    while (!atomic_load(&stop)) {
        *first = '\0';
        for (volatile int i = 0; i < 50; i++) {}
        *first = '/';
        for (volatile int i = 0; i < 50; i++) {}
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: race dup2|flip N PATH\n"); return 2; }
    int dup = strcmp(argv[1], "dup2") == 0, n = atoi(argv[2]), reached = 0;
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, argv[3], sizeof addr.sun_path - 1);
    socklen_t len = offsetof(struct sockaddr_un, sun_path) + strlen(argv[3]);
    pthread_t racer;
    if (dup) {
        atomic_store(&unix_fd, socket(AF_UNIX, SOCK_STREAM, 0));
        atomic_store(&inet_fd, socket(AF_INET, SOCK_STREAM, 0));
    }
    pthread_create(&racer, NULL, dup ? swap_fds : flip_byte, NULL);
    for (int i = 0; i < n; i++) {
        int fd = dup ? SLOT : socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&addr, len) == 0) {
            reached++;
            if (dup) {  /* that UNIX socket is connected now: a fresh one for the next try */
                int old = atomic_load(&unix_fd);
                atomic_store(&unix_fd, socket(AF_UNIX, SOCK_STREAM, 0));
                close(old);
            }
        }
        if (!dup) close(fd);
    }
    atomic_store(&stop, 1);
    pthread_join(racer, NULL);
    printf("reached=%d tries=%d\n", reached, n);
    return 0;
}
