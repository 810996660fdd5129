/*
 * bench_pcap.c - capture of the fabric's ports into a pcap file (see bench_pcap.h). The
 * thread enters the switch namespace (setns affects only the calling thread), opens one
 * AF_PACKET socket per port, and writes each frame with its time until told to stop.
 */
#include "apps/bench/bench_pcap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

#define PCAP_MAX_PORTS 64
#define PCAP_MAX_FRAMES 4000000ull
#define PCAP_MAX_BYTES (2ull << 30)
#define PCAP_SNAP 65535u

struct bench_pcap {
    char netns[128];
    unsigned nports;
    FILE *out;
    pthread_t tid;
    _Atomic int stop;
    int ready_rc; /* the thread's setup result */
    char why[160];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;
    uint64_t written, skipped, bytes;
    uint8_t buf[PCAP_SNAP];
};

static void put_header(FILE *f)
{
    uint32_t h[6] = {0xa1b2c3d4u, 2u | 4u << 16, 0, 0, PCAP_SNAP, 1 /* Ethernet */};
    fwrite(h, sizeof(h), 1, f);
}

static void put_frame(bench_pcap_t *p, const uint8_t *d, uint32_t caplen, uint32_t len)
{
    if (p->written >= PCAP_MAX_FRAMES || p->bytes + caplen > PCAP_MAX_BYTES) {
        p->skipped++;
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    uint32_t r[4] = {(uint32_t)tv.tv_sec, (uint32_t)tv.tv_usec, caplen, len};
    fwrite(r, sizeof(r), 1, p->out);
    fwrite(d, caplen, 1, p->out);
    p->written++;
    p->bytes += caplen + sizeof(r);
}

static void ready(bench_pcap_t *p, int rc)
{
    pthread_mutex_lock(&p->mu);
    p->ready_rc = rc;
    p->started = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void *capture(void *arg)
{
    bench_pcap_t *p = arg;
    char path[256];
    snprintf(path, sizeof(path), "/var/run/netns/%s", p->netns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
        set_err(p->why, sizeof(p->why), -errno, "entering namespace %s: %s", p->netns,
                strerror(errno));
        if (nsfd >= 0)
            close(nsfd);
        ready(p, -1);
        return NULL;
    }
    close(nsfd);
    struct pollfd pf[PCAP_MAX_PORTS];
    unsigned n = 0;
    for (unsigned i = 0; i < p->nports; i++) {
        char ifn[IFNAMSIZ];
        snprintf(ifn, sizeof(ifn), "p%u", i + 1);
        int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
        struct sockaddr_ll ll = {.sll_family = AF_PACKET,
                                 .sll_protocol = htons(ETH_P_ALL),
                                 .sll_ifindex = (int)if_nametoindex(ifn)};
        int big = 16 << 20;
        if (fd >= 0)
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
        if (fd < 0 || ll.sll_ifindex == 0 || bind(fd, (struct sockaddr *)&ll, sizeof(ll)) != 0) {
            set_err(p->why, sizeof(p->why), -errno, "capturing on %s in %s: %s", ifn, p->netns,
                    strerror(errno));
            if (fd >= 0)
                close(fd);
            for (unsigned k = 0; k < n; k++)
                close(pf[k].fd);
            ready(p, -1);
            return NULL;
        }
        pf[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    ready(p, 0);
    /* bounded: stops when told (the run's end) */
    while (!atomic_load(&p->stop)) {
        if (poll(pf, n, 20) <= 0)
            continue;
        for (unsigned k = 0; k < n; k++) {
            for (int burst = 0; burst < 256; burst++) {
                ssize_t r = recv(pf[k].fd, p->buf, sizeof(p->buf), MSG_TRUNC | MSG_DONTWAIT);
                if (r <= 0)
                    break;
                uint32_t len = (uint32_t)r, cap = len < PCAP_SNAP ? len : PCAP_SNAP;
                put_frame(p, p->buf, cap, len);
            }
        }
    }
    for (unsigned k = 0; k < n; k++)
        close(pf[k].fd);
    return NULL;
}

int bench_pcap_start(const char *netns, unsigned nports, const char *path, bench_pcap_t **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    if (nports == 0 || nports > PCAP_MAX_PORTS || strlen(netns) >= 100) {
        return set_err(err, errlen, -EINVAL, "pcap: bad namespace or port count");
    }
    bench_pcap_t *p = calloc(1, sizeof(*p));
    if (!p)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    snprintf(p->netns, sizeof(p->netns), "%s", netns);
    p->nports = nports;
    p->out = fopen(path, "wb");
    if (!p->out) {
        int e = errno;
        free(p);
        return set_err(err, errlen, -e, "--pcap %s: %s", path, strerror(e));
    }
    put_header(p->out);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->tid, NULL, capture, p) != 0) {
        fclose(p->out);
        free(p);
        return set_err(err, errlen, -EAGAIN, "pcap: cannot start the capture thread");
    }
    pthread_mutex_lock(&p->mu);
    while (!p->started)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    if (p->ready_rc != 0) {
        set_err(err, errlen, -EIO, "%s", p->why);
        pthread_join(p->tid, NULL);
        fclose(p->out);
        free(p);
        return -EIO;
    }
    *out = p;
    return 0;
}

void bench_pcap_stop(bench_pcap_t *p, uint64_t *written, uint64_t *skipped)
{
    *written = *skipped = 0;
    if (!p)
        return;
    usleep(50000); /* the last results' frames */
    atomic_store(&p->stop, 1);
    pthread_join(p->tid, NULL);
    fclose(p->out);
    *written = p->written;
    *skipped = p->skipped;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}
