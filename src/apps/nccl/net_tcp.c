/*
 * net_tcp.c - "ncclNetPlugin_v8": the point-to-point network NCCL requires beside a CollNet
 * plugin (it loads both tables from one library), a small TCP transport of its own. One
 * device; a listen handle carries an IPv4 address and port; a connection is one TCP stream,
 * opened with an 8-byte greeting, on which each message travels as an 8-byte header (its
 * length and tag) and its bytes. Requests on a comm complete in the order they were posted
 * and are moved on, never blocking, by isend/irecv/test. Host memory only (NCCL stages
 * device memory through its own host buffers for a network without NCCL_PTR_CUDA).
 *
 * The address peers reach: $INAGG_NCCL_ADDR (IPv4), else the one this host reaches the
 * switch from ($INAGG_SWITCH), else its first non-loopback IPv4 interface that is up, else
 * 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "nccl_abi.h"
#include "plog.h"

#define TCP_MAGIC 0x31544e6767616e69ull /* "inaggNT1" little-endian: the greeting */
#define TCP_MAX_REQS 32 /* posted and not yet tested done, per comm */
#define TCP_TIMEOUT_MS_DEFAULT 30000u

typedef struct {
    uint64_t magic;
    struct sockaddr_in addr;
} tcp_handle_t;
_Static_assert(sizeof(tcp_handle_t) <= NCCL_NET_HANDLE_MAXSIZE, "the handle fits NCCL's");

typedef struct {
    int fd;
} tcp_listen_t;

typedef struct tcp_comm tcp_comm_t;

typedef struct {
    tcp_comm_t *comm;
    int used, done;
    char *data;
    size_t cap; /* send: the message's length; recv: the buffer's */
    int tag;
    unsigned char hdr[8]; /* length, tag: big-endian uint32 each */
    size_t hdr_off, off, len;
} tcp_req_t;

struct tcp_comm {
    int fd;
    int sending;
    int failed; /* a transfer failed: the stream is out of step, every later call fails */
    uint64_t posted, moving; /* requests posted; the one being moved */
    tcp_req_t reqs[TCP_MAX_REQS];
};

static struct in_addr g_addr;
static unsigned g_timeout_ms = TCP_TIMEOUT_MS_DEFAULT;
static char g_mr_token; /* regMr's handle: TCP needs no registration */

/* The local address of a UDP socket connected toward the first switch of `list`. */
static int addr_toward(const char *list, struct in_addr *out)
{
    char host[256];
    size_t n = strcspn(list, ",");
    if (n == 0 || n >= sizeof(host))
        return -1;
    memcpy(host, list, n);
    host[n] = '\0';
    char *colon = strrchr(host, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = -1;
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &len) == 0) {
        *out = me.sin_addr;
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return rc;
}

static int addr_first_interface(struct in_addr *out)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return -1;
    int rc = -1;
    for (struct ifaddrs *i = all; i && rc < 0; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            *out = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            rc = 0;
        }
    freeifaddrs(all);
    return rc;
}

static ncclResult_t tcp_init(ncclDebugLogger_t logger)
{
    plog_set_logger(logger);
    g_timeout_ms = plog_env_uint("INAGG_NCCL_TIMEOUT_MS", TCP_TIMEOUT_MS_DEFAULT);
    const char *a = getenv("INAGG_NCCL_ADDR"), *sw = getenv("INAGG_SWITCH"), *how;
    if (a && *a) {
        if (inet_pton(AF_INET, a, &g_addr) != 1)
            return PFAIL(ncclInvalidArgument, "net: $INAGG_NCCL_ADDR=%s is not an IPv4 address", a);
        how = "$INAGG_NCCL_ADDR";
    } else if (sw && *sw && addr_toward(sw, &g_addr) == 0) {
        how = "the route toward $INAGG_SWITCH";
    } else if (addr_first_interface(&g_addr) == 0) {
        how = "the first IPv4 interface up";
    } else {
        g_addr.s_addr = htonl(INADDR_LOOPBACK);
        how = "no other address found: this host's ranks only";
    }
    char text[INET_ADDRSTRLEN];
    PLOG_INFO("net: peers reach this process at %s (%s)",
              inet_ntop(AF_INET, &g_addr, text, sizeof(text)), how);
    return ncclSuccess;
}

static ncclResult_t tcp_devices(int *ndev)
{
    if (!ndev)
        return PFAIL(ncclInvalidArgument, "net: devices(NULL)");
    *ndev = 1;
    return ncclSuccess;
}

static ncclResult_t tcp_get_properties(int dev, ncclNetProperties_v8_t *props)
{
    if (dev != 0 || !props)
        return PFAIL(ncclInvalidArgument, "net: getProperties of device %d: there is device 0",
                     dev);
    plog_device_props(props, NCCL_PTR_HOST);
    return ncclSuccess;
}

static ncclResult_t tcp_listen(int dev, void *handle, void **listen_comm)
{
    if (dev != 0 || !handle || !listen_comm)
        return PFAIL(ncclInvalidArgument, "net: listen on device %d: there is device 0", dev);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(any);
    tcp_listen_t *l = calloc(1, sizeof(*l));
    if (fd < 0 || !l || bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0 ||
        listen(fd, 256) != 0 || getsockname(fd, (struct sockaddr *)&any, &len) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        free(l);
        return PFAIL(ncclSystemError, "net: listen: %s", strerror(e));
    }
    tcp_handle_t h = {.magic = TCP_MAGIC, .addr = any};
    h.addr.sin_addr = g_addr;
    memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    memcpy(handle, &h, sizeof(h));
    l->fd = fd;
    *listen_comm = l;
    return ncclSuccess;
}

static tcp_comm_t *comm_new(int fd, int sending)
{
    tcp_comm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->fd = fd;
    c->sending = sending;
    return c;
}

/* Wait until fd is ready for `events`, at most g_timeout_ms: 0, or -errno. */
static int wait_fd(int fd, short events)
{
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    do {
        n = poll(&p, 1, (int)g_timeout_ms);
    } while (n < 0 && errno == EINTR);
    return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* Connect to a listen handle; the connection is up (in the peer's backlog) on return, so the
 * call does not wait on the peer's accept. */
static ncclResult_t tcp_connect(int dev, void *handle, void **send_comm,
                                ncclNetDeviceHandle_v8_t **dev_comm)
{
    (void)dev_comm; /* a host device: NCCL asks for no device offload */
    tcp_handle_t h;
    if (!handle || !send_comm)
        return PFAIL(ncclInvalidArgument, "net: connect without a handle");
    memcpy(&h, handle, sizeof(h));
    if (dev != 0 || h.magic != TCP_MAGIC || h.addr.sin_family != AF_INET)
        return PFAIL(ncclInvalidArgument,
                     "net: connect: the handle is not a listen handle of this plugin");
    char peer[INET_ADDRSTRLEN + 8];
    inet_ntop(AF_INET, &h.addr.sin_addr, peer, INET_ADDRSTRLEN);
    snprintf(peer + strlen(peer), 8, ":%u", (unsigned)ntohs(h.addr.sin_port));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
    if (fd < 0)
        return PFAIL(ncclSystemError, "net: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&h.addr, sizeof(h.addr)) != 0) {
        err = errno == EINPROGRESS ? wait_fd(fd, POLLOUT) : -errno;
        socklen_t len = sizeof(int);
        int so = 0;
        if (err == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) == 0 && so != 0)
            err = -so;
    }
    uint64_t hello = TCP_MAGIC;
    if (err == 0 && send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello))
        err = -errno;
    tcp_comm_t *c = err == 0 ? comm_new(fd, 1) : NULL;
    if (!c) {
        close(fd);
        return PFAIL(ncclSystemError, "net: connect to %s: %s", peer,
                     err == -ETIMEDOUT ? "no answer within $INAGG_NCCL_TIMEOUT_MS"
                                       : strerror(err ? -err : ENOMEM));
    }
    *send_comm = c;
    return ncclSuccess;
}

static ncclResult_t tcp_accept(void *listen_comm, void **recv_comm,
                               ncclNetDeviceHandle_v8_t **dev_comm)
{
    (void)dev_comm;
    tcp_listen_t *l = listen_comm;
    if (!l || !recv_comm)
        return PFAIL(ncclInvalidArgument, "net: accept without a listen comm");
    *recv_comm = NULL;
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? ncclSuccess /* nobody yet: NCCL calls again */
                   : PFAIL(ncclSystemError, "net: accept: %s", strerror(errno));
    uint64_t hello = 0;
    size_t got = 0;
    int err = 0;
    while (got < sizeof(hello) && err == 0) {
        ssize_t n = recv(fd, (char *)&hello + got, sizeof(hello) - got, 0);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0)
            err = -ECONNRESET;
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            err = wait_fd(fd, POLLIN);
        else if (errno != EINTR)
            err = -errno;
    }
    tcp_comm_t *c = err == 0 && hello == TCP_MAGIC ? comm_new(fd, 0) : NULL;
    if (!c) {
        close(fd);
        return PFAIL(ncclRemoteError,
                     "net: accept: the peer did not greet as this plugin does (%s)",
                     err ? strerror(-err) : "wrong greeting");
    }
    *recv_comm = c;
    return ncclSuccess;
}

static ncclResult_t tcp_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    (void)data, (void)size;
    if (!comm || !mhandle)
        return PFAIL(ncclInvalidArgument, "net: regMr without a comm");
    if (type != NCCL_PTR_HOST)
        return PFAIL(ncclInvalidArgument, "net: regMr of memory type %d: host memory only", type);
    *mhandle = &g_mr_token;
    return ncclSuccess;
}

static ncclResult_t tcp_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                      uint64_t offset, int fd, void **mhandle)
{
    (void)comm, (void)data, (void)size, (void)type, (void)offset, (void)fd, (void)mhandle;
    return PFAIL(ncclInvalidUsage, "net: DMA-BUF registration: host memory only");
}

static ncclResult_t tcp_dereg_mr(void *comm, void *mhandle)
{
    (void)comm;
    return mhandle == &g_mr_token ? ncclSuccess
                                  : PFAIL(ncclInvalidArgument, "net: deregMr of a foreign handle");
}

/* Move the send request on as far as the socket takes: 0 (done or not yet), -1 failed. */
static int move_send(tcp_comm_t *c, tcp_req_t *r)
{
    while (!r->done) {
        struct iovec iov[2];
        int n = 0;
        if (r->hdr_off < sizeof(r->hdr))
            iov[n++] = (struct iovec){r->hdr + r->hdr_off, sizeof(r->hdr) - r->hdr_off};
        if (r->off < r->len)
            iov[n++] = (struct iovec){r->data + r->off, r->len - r->off};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t k = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 0;
            return PLOG_WARN("net: send: %s", strerror(errno)), -1;
        }
        size_t h = sizeof(r->hdr) - r->hdr_off;
        size_t to_hdr = (size_t)k < h ? (size_t)k : h;
        r->hdr_off += to_hdr;
        r->off += (size_t)k - to_hdr;
        r->done = r->hdr_off == sizeof(r->hdr) && r->off == r->len;
    }
    return 0;
}

/* Read what is there into buf[*off..want): 1 complete, 0 not yet, -1 failed. */
static int read_some(tcp_comm_t *c, void *buf, size_t *off, size_t want)
{
    while (*off < want) {
        ssize_t k = recv(c->fd, (char *)buf + *off, want - *off, MSG_DONTWAIT);
        if (k > 0)
            *off += (size_t)k;
        else if (k == 0)
            return PLOG_WARN("net: receive: the peer closed the connection"), -1;
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        else if (errno != EINTR)
            return PLOG_WARN("net: receive: %s", strerror(errno)), -1;
    }
    return 1;
}

static int move_recv(tcp_comm_t *c, tcp_req_t *r)
{
    if (r->hdr_off < sizeof(r->hdr)) {
        int rc = read_some(c, r->hdr, &r->hdr_off, sizeof(r->hdr));
        if (rc <= 0)
            return rc;
        uint32_t len, tag;
        memcpy(&len, r->hdr, 4);
        memcpy(&tag, r->hdr + 4, 4);
        r->len = ntohl(len);
        if (r->len > r->cap)
            return PLOG_WARN("net: a message of %zu bytes for a receive of %zu", r->len, r->cap),
                   -1;
        if ((int)ntohl(tag) != r->tag)
            return PLOG_WARN("net: a message with tag %d for a receive of tag %d", (int)ntohl(tag),
                             r->tag),
                   -1;
    }
    int rc = read_some(c, r->data, &r->off, r->len);
    if (rc < 0)
        return rc;
    r->done = rc == 1;
    return 0;
}

/* Move the comm's requests on, oldest first: 0, or -1 (logged; the comm is failed). */
static int progress(tcp_comm_t *c)
{
    if (c->failed)
        return PLOG_WARN("net: the connection failed earlier"), -1;
    while (c->moving < c->posted) {
        tcp_req_t *r = &c->reqs[c->moving % TCP_MAX_REQS];
        if ((c->sending ? move_send(c, r) : move_recv(c, r)) < 0) {
            c->failed = 1;
            return -1;
        }
        if (!r->done)
            break;
        c->moving++;
    }
    return 0;
}

/* A free request for the next post, or NULL (TCP_MAX_REQS not yet tested done). */
static tcp_req_t *post(tcp_comm_t *c, void *data, int size, int tag)
{
    tcp_req_t *r = &c->reqs[c->posted % TCP_MAX_REQS];
    if (r->used)
        return NULL;
    *r = (tcp_req_t){.comm = c, .used = 1, .data = data, .cap = (size_t)size, .tag = tag};
    uint32_t len = htonl((uint32_t)size), t = htonl((uint32_t)tag);
    memcpy(r->hdr, &len, 4);
    memcpy(r->hdr + 4, &t, 4);
    if (c->sending)
        r->len = (size_t)size;
    c->posted++;
    return r;
}

static ncclResult_t tcp_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                              void **request)
{
    (void)mhandle;
    tcp_comm_t *c = send_comm;
    if (!c || !request || !c->sending || size < 0 || (size > 0 && !data))
        return PFAIL(ncclInvalidArgument, "net: isend of %d bytes: bad arguments", size);
    if (c->failed)
        return PFAIL(ncclSystemError, "net: isend: the connection failed earlier");
    tcp_req_t *r = post(c, data, size, tag);
    *request = r;
    return r && progress(c) < 0 ? ncclSystemError : ncclSuccess;
}

static ncclResult_t tcp_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                              void **mhandles, void **request)
{
    (void)mhandles;
    tcp_comm_t *c = recv_comm;
    if (!c || !request || c->sending || n != 1 || !data || !sizes || !tags || sizes[0] < 0)
        return PFAIL(ncclInvalidArgument,
                     "net: irecv of %d buffers: one buffer per receive (maxRecvs is 1)", n);
    if (c->failed)
        return PFAIL(ncclSystemError, "net: irecv: the connection failed earlier");
    tcp_req_t *r = post(c, data[0], sizes[0], tags[0]);
    *request = r;
    return r && progress(c) < 0 ? ncclSystemError : ncclSuccess;
}

static ncclResult_t tcp_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                               void **request)
{
    (void)recv_comm, (void)n, (void)data, (void)sizes, (void)mhandles;
    *request = NULL; /* host memory: received bytes are where the CPU wrote them */
    return ncclSuccess;
}

static ncclResult_t tcp_test(void *request, int *done, int *sizes)
{
    tcp_req_t *r = request;
    if (!r || !done || !r->used)
        return PFAIL(ncclInvalidArgument, "net: test of a request that is not in flight");
    if (progress(r->comm) < 0)
        return ncclSystemError;
    *done = r->done;
    if (r->done) {
        if (sizes)
            sizes[0] = (int)r->len;
        r->used = 0;
    }
    return ncclSuccess;
}

static ncclResult_t tcp_close(void *comm)
{
    tcp_comm_t *c = comm;
    if (c) {
        close(c->fd);
        free(c);
    }
    return ncclSuccess;
}

static ncclResult_t tcp_close_listen(void *listen_comm)
{
    tcp_listen_t *l = listen_comm;
    if (l) {
        close(l->fd);
        free(l);
    }
    return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "inagg",
    .init = tcp_init,
    .devices = tcp_devices,
    .getProperties = tcp_get_properties,
    .listen = tcp_listen,
    .connect = tcp_connect,
    .accept = tcp_accept,
    .regMr = tcp_reg_mr,
    .regMrDmaBuf = tcp_reg_mr_dmabuf,
    .deregMr = tcp_dereg_mr,
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .iflush = tcp_iflush,
    .test = tcp_test,
    .closeSend = tcp_close,
    .closeRecv = tcp_close,
    .closeListen = tcp_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
