/* proto.c - the table of the worker's slot protocols and what their engines share. */
#include "worker/proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/errmsg.h"
#include "base/util.h"
#include "kernels/vec.h"
#include "transport/faults.h"
#include "transport/udp.h"

extern const worker_proto_ops_t worker_proto_switchml, worker_proto_p4sgd;

static const worker_proto_ops_t *const protocols[] = {
    &worker_proto_switchml,
    &worker_proto_p4sgd,
};

const worker_proto_ops_t *worker_proto_find(inagg_protocol_t protocol)
{
    for (size_t i = 0; i < INAGG_ARRAY_LEN(protocols); i++)
        if (protocols[i]->protocol == protocol)
            return protocols[i];
    return NULL;
}

void worker_counters_init(worker_counters_t *c, rto_estimator_t *rto, const worker_params_t *p)
{
    rto_init(rto, p->rto_us, p->rto_min_us, p->rto_max_us);
    atomic_store(&c->rto_us, p->rto_us);
}

void worker_rtt_sample(worker_counters_t *c, rto_estimator_t *rto, double sample_us)
{
    rto_sample(rto, sample_us);
    atomic_store_explicit(&c->srtt_us, (uint32_t)rto->srtt_us, memory_order_relaxed);
    atomic_store_explicit(&c->rto_us, rto->rto_us, memory_order_relaxed);
}

void worker_counters_add(const worker_counters_t *c, inagg_stats_t *acc)
{
    acc->packets_sent += atomic_load_explicit(&c->sent, memory_order_relaxed);
    acc->packets_received += atomic_load_explicit(&c->received, memory_order_relaxed);
    acc->retransmissions += atomic_load_explicit(&c->retransmissions, memory_order_relaxed);
    acc->duplicates_ignored += atomic_load_explicit(&c->duplicates, memory_order_relaxed);
    acc->invalid_dropped += atomic_load_explicit(&c->invalid, memory_order_relaxed);
    acc->bytes_sent += atomic_load_explicit(&c->bytes_sent, memory_order_relaxed);
    acc->bytes_received += atomic_load_explicit(&c->bytes_received, memory_order_relaxed);
    uint32_t srtt = atomic_load_explicit(&c->srtt_us, memory_order_relaxed);
    uint32_t rto = atomic_load_explicit(&c->rto_us, memory_order_relaxed);
    if (srtt > acc->srtt_us)
        acc->srtt_us = srtt;
    if (rto > acc->rto_us)
        acc->rto_us = rto;
}

int worker_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns)
{
    uint64_t now = util_now_ns();
    if (now >= deadline_ns)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t left = deadline_ns - now;
    ts.tv_sec += (time_t)(left / 1000000000ull);
    ts.tv_nsec += (long)(left % 1000000000ull);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
    return 0;
}

void worker_encode_plain(inagg_dtype_t dtype, const void *src, uint32_t *payload, size_t len)
{
    if (dtype == INAGG_INT32)
        vec_i32_to_be((const int32_t *)src, payload, len);
    else
        vec_f32_to_be((const float *)src, payload, len);
}

void worker_decode_plain(inagg_dtype_t dtype, inagg_op_t op, uint32_t world,
                         const uint32_t *payload, void *dst, size_t len)
{
    if (dtype == INAGG_INT32) {
        vec_be_to_i32(payload, (int32_t *)dst, len);
        if (op == INAGG_AVG)
            vec_i32_div((int32_t *)dst, len, (int32_t)world);
    } else {
        vec_be_to_f32(payload, (float *)dst, len);
        if (op == INAGG_AVG)
            vec_f32_scale((float *)dst, len, 1.0f / (float)world);
    }
}

struct sockaddr_in worker_slot_addr(const worker_params_t *p, uint32_t slot)
{
    struct sockaddr_in a = p->sw_addr;
    a.sin_port = htons((uint16_t)(ntohs(p->sw_addr.sin_port) + worker_slot_thread(p, slot)));
    return a;
}

int worker_faults_init(const worker_params_t *p, uint32_t stream, faults_t *in, faults_t *out,
                       char *err, size_t errlen)
{
    char ferr[128];
    if (faults_parse(in, p->faults, ferr, sizeof(ferr)) != 0 ||
        faults_parse(out, p->faults, ferr, sizeof(ferr)) != 0) {
        set_err(err, errlen, "bad fault spec: %s", ferr);
        return -EINVAL;
    }
    util_rng_seed(&in->rng, in->seed * 1000003u + p->rank * 131u + stream);
    util_rng_seed(&out->rng, out->seed * 7919u + p->rank * 137u + stream + 0x5bd1e995u);
    return 0;
}

int worker_open_socket(int buffer, char *err, size_t errlen)
{
    int fd = udp_open_any(buffer);
    if (fd < 0)
        set_err(err, errlen, "cannot open a UDP socket: %s", strerror(-fd));
    return fd;
}

void worker_rx_init(struct mmsghdr *msgs, struct iovec *iov, uint8_t *arena, int n, size_t cap)
{
    for (int i = 0; i < n; i++) {
        iov[i] = (struct iovec){arena + (size_t)i * cap, cap};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
}
