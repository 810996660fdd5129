/*
 * p4sgd.pml - the p4sgd slot protocol (docs/PROTOCOL.md section 9) as a Promela model: the
 * switch's one-copy slot of src/switchd/server/p4slot.c (p4slot_contribute, p4slot_ack: a full round
 * number per slot, aggregation and acknowledgement bitmaps and counters, one row per rank
 * summed on the last contribution, the result multicast then, resent to a late contributor,
 * a confirmation multicast when every rank acknowledged and resent for the round just
 * confirmed), the dataplane's piggybacking (src/switchd/server/dataplane.c handle_p4/p4_ack: an
 * acknowledgement riding on a contribution is applied first; the confirmations it triggers
 * queue per rank, at most S, and ride on that rank's next results) and the worker of
 * src/lib/worker/p4engine.c (operation n on slot n % S in round n / S, started in order and only
 * on a free slot; a timer resends the contribution; the result is delivered at once and
 * acknowledged, the acknowledgement first waiting to ride on the next contribution; a timer
 * resends it alone; a repeated result is answered with the acknowledgement; the confirmation,
 * alone or riding on a result, frees the slot).
 *
 * Network: as in switchml.pml, one bag per (worker, slot) and direction, any packet of a bag
 * can come next, its consumer may lose it (LOSS times in a run) or process it and leave a
 * copy in flight (DUPS times). A packet travels in the bag of the slot in its header.
 *
 * Parameters (spin -D...): W workers, S slots, NOPS operations per worker, LOSS, DUPS, PIGGY
 * (1: acknowledgements and confirmations ride on data packets, as the code does; 0: always
 * alone), BROKEN (0: the code as written; 1..3: deliberately broken variants, see below).
 *
 * Safety (assertions): every delivered result is the sum of every rank's share of that
 * operation, each counted once; every operation is delivered once per worker; an aggregation
 * count never exceeds W; the switch overwrites a slot's result, and confirms a round, only
 * when every worker holds that round's result; a worker frees a slot only after the switch
 * moved it on. Liveness (ltl `live`, weak fairness): every worker delivers every operation
 * and sees every slot confirmed.
 */

#ifndef W
#define W 2
#endif
#ifndef S
#define S 2
#endif
#ifndef NOPS
#define NOPS 4
#endif
#ifndef LOSS
#define LOSS 1
#endif
#ifndef DUPS
#define DUPS 1
#endif
#ifndef PIGGY
#define PIGGY 1
#endif
#ifndef BROKEN
#define BROKEN 0
#endif
/* BROKEN variants:
 *   1  the slot is confirmed and reused once W - 1 ranks acknowledged
 *   2  a duplicate contribution to an open round is counted again (agg bitmap not consulted)
 *   3  an acknowledgement of the round just confirmed is ignored (no RESEND_CONFIRM)
 */

#define CAP 3
#define NB (W * S)
#if NOPS > 4 * S || W > 3 || S > 3
#error "the packet fields hold rounds 0..3, ranks 0..2 and slots 0..2"
#endif
/* When a timer may fire: see switchml.pml. LIVENESS: a resend that the switch can only
 * ignore (the contribution or acknowledgement is already counted in the open phase) stays
 * quiet. */
#define IN_AGG(w, s, r) (srnd[s] == (r) && sph[s] == P4_AGGREGATING && (aggbm[s] & (1 << (w))) != 0)
#define IN_ACK(w, s, r) (srnd[s] == (r) && sph[s] == P4_ACKING && (ackbm[s] & (1 << (w))) != 0)
#ifdef EAGER_TIMERS
#define TIMER_AGG(w, s, b) (upcnt[b] + 2 <= CAP)
#define TIMER_ACK(w, s, b) (upcnt[b] + 2 <= CAP)
#elif defined(LIVENESS)
#define TIMER_AGG(w, s, b) (timeout && !IN_AGG(w, s, wrnd[b]))
#define TIMER_ACK(w, s, b) (timeout && !IN_ACK(w, s, wrnd[b]))
#else
#define TIMER_AGG(w, s, b) (timeout)
#define TIMER_ACK(w, s, b) (timeout)
#endif

/* worker slot phases (p4engine.c) and switch slot phases (p4slot.h) */
#define FREE 0
#define AGG 1
#define ACKN 2
#define P4_AGGREGATING 0
#define P4_ACKING 1

/* Towards the switch: a contribution (kind 0, maybe carrying the acknowledgement of slot
 * pg - 1, round pr) or an acknowledgement (kind 1). */
#define UP(kind, r, pg, pr) (1 + (kind) + 2 * (r) + 16 * (pg) + 64 * (pr))
#define UP_KIND(m) (((m) - 1) % 2)
#define UP_ROUND(m) ((((m) - 1) / 2) % 8)
#define UP_PG(m) (((m) / 16) % 4)
#define UP_PR(m) ((m) / 64)
/* Towards a worker: a result (kind 0, with its sum, maybe carrying the confirmation of slot
 * pg - 1, round pr) or a confirmation (kind 1). */
#define DN(kind, r, pg, pr, x) (1 + (kind) + 2 * (r) + 16 * (pg) + 64 * (pr) + 256 * (x))
#define DN_KIND(m) (((m) - 1) % 2)
#define DN_ROUND(m) ((((m) - 1) / 2) % 8)
#define DN_PG(m) (((m) / 16) % 4)
#define DN_PR(m) (((m) / 64) % 4)
#define DN_SUM(m) ((m) / 256)

/* Rank w's share of operation n, in a field of its own (see switchml.pml). */
#define VAL(w, n) (((n) + 1) << (5 * (w)))
#define SUMX(n) (((n) + 1) * (((1 << (5 * W)) - 1) / 31))
/* Rounds slot s serves. */
#define NR(s) ((NOPS - (s) + S - 1) / S)

short up[NB * CAP];
byte upcnt[NB];
int dn[NB * CAP];
byte dncnt[NB];
byte nloss, ndup;

/* Switch, per slot. */
byte srnd[S];
bit sph[S];
byte aggbm[S], aggcnt[S], ackbm[S], ackcnt[S];
int rows[S * W];        /* [slot][rank], kept across rounds as the code keeps them */
int res[S];
/* Dataplane: the confirmations waiting for a result to rank w, oldest first:
 * (slot + 1) + 4 * round. */
byte ring[W * S];
byte ringcnt[W];

/* Workers. */
byte wph[NB];
byte wrnd[NB];          /* round in flight, or the next one when free */
bit pend[NB];           /* acknowledging, and the acknowledgement has not left yet */
short wpkt[NB];         /* the contribution, resent as is (with the acknowledgement it carries) */
byte nextop[W];

/* Ghosts. */
int got[W];             /* bit n: operation n delivered */
byte ndone;             /* (worker, slot) pairs done: every round delivered and confirmed */

ltl live { <> (ndone == NB) }

inline up_put(b, x)
{
    upcnt[b] < CAP;
    d_step {
        k = upcnt[b];
        do
        :: k > 0 && up[(b) * CAP + k - 1] > x -> up[(b) * CAP + k] = up[(b) * CAP + k - 1]; k--
        :: else -> break
        od;
        up[(b) * CAP + k] = x;
        upcnt[b]++;
        k = 0
    }
}

inline up_pick(b, i)
{
    if
    :: i = 0
    :: upcnt[b] > 1 && up[(b) * CAP + 1] != up[(b) * CAP] -> i = 1
    :: upcnt[b] > 2 && up[(b) * CAP + 2] != up[(b) * CAP + 1] -> i = 2
    fi
}

inline up_take(b, i, x)
{
    d_step {
        x = up[(b) * CAP + i];
        do
        :: i + 1 < upcnt[b] -> up[(b) * CAP + i] = up[(b) * CAP + i + 1]; i++
        :: else -> break
        od;
        up[(b) * CAP + upcnt[b] - 1] = 0;
        upcnt[b]--;
        i = 0
    }
}

inline up_recv(b, i, x)
{
    up_pick(b, i);
    if
    :: nloss < LOSS -> up_take(b, i, x); nloss++; x = 0
    :: ndup < DUPS -> x = up[(b) * CAP + i]; ndup++; i = 0
    :: up_take(b, i, x)
    fi
}

inline dn_put(b, x)
{
    dncnt[b] < CAP;
    d_step {
        k = dncnt[b];
        do
        :: k > 0 && dn[(b) * CAP + k - 1] > x -> dn[(b) * CAP + k] = dn[(b) * CAP + k - 1]; k--
        :: else -> break
        od;
        dn[(b) * CAP + k] = x;
        dncnt[b]++;
        k = 0
    }
}

inline dn_pick(b, i)
{
    if
    :: i = 0
    :: dncnt[b] > 1 && dn[(b) * CAP + 1] != dn[(b) * CAP] -> i = 1
    :: dncnt[b] > 2 && dn[(b) * CAP + 2] != dn[(b) * CAP + 1] -> i = 2
    fi
}

inline dn_take(b, i, x)
{
    d_step {
        x = dn[(b) * CAP + i];
        do
        :: i + 1 < dncnt[b] -> dn[(b) * CAP + i] = dn[(b) * CAP + i + 1]; i++
        :: else -> break
        od;
        dn[(b) * CAP + dncnt[b] - 1] = 0;
        dncnt[b]--;
        i = 0
    }
}

inline dn_recv(b, i, x)
{
    dn_pick(b, i);
    if
    :: nloss < LOSS -> dn_take(b, i, x); nloss++; x = 0
    :: ndup < DUPS -> x = dn[(b) * CAP + i]; ndup++; i = 0
    :: dn_take(b, i, x)
    fi
}

/* p4engine.c confirm: slot k of worker w confirmed for round r. */
inline confirm(cw, ck, cr)
{
    if
    :: wph[cw * S + ck] == ACKN && wrnd[cw * S + ck] == cr && !pend[cw * S + ck] ->
        assert(srnd[ck] > cr); /* the switch really moved the slot on */
        wph[cw * S + ck] = FREE;
        wrnd[cw * S + ck]++;
        if
        :: wrnd[cw * S + ck] == NR(ck) -> ndone++
        :: else -> skip
        fi
    :: else -> skip
    fi
}

proctype Worker(byte w; byte s)
{
    byte b = w * S + s;
    byte i, k, pg, pr, r;
    int m;

    if
    :: NR(s) == 0 -> ndone++
    :: else -> skip
    fi;
end:
    do
    :: atomic {
        /* p4engine_start / start_on_slot: the next operation, on its slot once free */
        wph[b] == FREE && nextop[w] == wrnd[b] * S + s && nextop[w] < NOPS && upcnt[b] < CAP ->
        pg = 0;
        pr = 0;
#if PIGGY
        /* pending_ack_for: the first slot whose acknowledgement waits rides along */
        k = 0;
        do
        :: k < S && pend[w * S + k] -> pg = k + 1; pr = wrnd[w * S + k]; pend[w * S + k] = 0; break
        :: k < S && !pend[w * S + k] -> k++
        :: k == S -> break
        od;
        k = 0;
#endif
        wpkt[b] = UP(0, wrnd[b], pg, pr);
        wph[b] = AGG;
        nextop[w]++;
        up_put(b, wpkt[b]);
        pg = 0;
        pr = 0
       }
    :: atomic {
        /* the contribution's timer: the same bytes again */
        wph[b] == AGG && TIMER_AGG(w, s, b) ->
        up_put(b, wpkt[b])
       }
    :: atomic {
        /* nothing carried the waiting acknowledgement in time: it goes alone */
        wph[b] == ACKN && pend[b] && upcnt[b] < CAP ->
        pend[b] = 0;
        up_put(b, UP(1, wrnd[b], 0, 0))
       }
    :: atomic {
        /* the acknowledgement's timer */
        wph[b] == ACKN && !pend[b] && TIMER_ACK(w, s, b) ->
        up_put(b, UP(1, wrnd[b], 0, 0))
       }
    :: atomic {
        dncnt[b] > 0 ->
        dn_recv(b, i, m);
        if
        :: m != 0 ->
            /* p4engine.c handle_packet */
            r = DN_ROUND(m);
            if
            :: DN_KIND(m) == 0 && DN_PG(m) != 0 -> confirm(w, DN_PG(m) - 1, DN_PR(m))
            :: else -> skip
            fi;
            if
            :: wph[b] == FREE || r != wrnd[b] -> skip /* duplicate */
            :: else ->
                if
                :: DN_KIND(m) == 1 ->
                    if
                    :: wph[b] == ACKN -> confirm(w, s, r)
                    :: else -> skip /* a confirmation before the result: invalid */
                    fi
                :: DN_KIND(m) == 0 && wph[b] == ACKN ->
                    /* the result again: our acknowledgement was lost; answer at once
                     * (when the bag is full the timer sends it later) */
                    pend[b] = 0;
                    if
                    :: upcnt[b] < CAP -> up_put(b, UP(1, wrnd[b], 0, 0))
                    :: else -> skip
                    fi
                :: DN_KIND(m) == 0 && wph[b] == AGG ->
                    assert(DN_SUM(m) == SUMX(r * S + s));
                    assert((got[w] & (1 << (r * S + s))) == 0);
                    got[w] = got[w] | (1 << (r * S + s));
                    wph[b] = ACKN;
                    pend[b] = 1
                fi
            fi
        :: else -> skip
        fi;
        m = 0; r = 0
       }
    od
}

/* p4slot_ack and dataplane.c p4_ack: rank w acknowledges round r of slot k; piggy: it rode
 * on a contribution. */
inline p4_ack(ak, aw, ar, apiggy)
{
    ahead = ar - srnd[ak];
    if
    :: ahead == -1 ->
        /* RESEND_CONFIRM: its confirmation was lost */
        if
        :: BROKEN != 3 -> dn_put(aw * S + ak, DN(1, ar, 0, 0, 0))
        :: else -> skip
        fi
    :: ahead < -1 -> skip /* STALE */
    :: ahead > 0 || (ahead == 0 && sph[ak] != P4_ACKING) -> skip /* AHEAD */
    :: ahead == 0 && sph[ak] == P4_ACKING && (ackbm[ak] & (1 << aw)) != 0 -> skip /* DUP_ACK */
    :: ahead == 0 && sph[ak] == P4_ACKING && (ackbm[ak] & (1 << aw)) == 0 ->
        ackbm[ak] = ackbm[ak] | (1 << aw);
        ackcnt[ak]++;
        if
        :: ackcnt[ak] >= W || (BROKEN == 1 && ackcnt[ak] >= W - 1) ->
            /* CONFIRMED: every rank must have the result */
            q = 0;
            do
            :: q < W -> assert((got[q] & (1 << (srnd[ak] * S + ak))) != 0); q++
            :: else -> break
            od;
            srnd[ak]++;
            sph[ak] = P4_AGGREGATING;
            aggbm[ak] = 0;
            aggcnt[ak] = 0;
            q = 0;
            do
            :: q < W ->
                if
                :: apiggy && ringcnt[q] < S -> /* push_confirm */
                    ring[q * S + ringcnt[q]] = ak + 1 + 4 * ar;
                    ringcnt[q]++
                :: else -> dn_put(q * S + ak, DN(1, ar, 0, 0, 0))
                fi;
                q++
            :: else -> break
            od;
            q = 0
        :: else -> skip /* ACKED */
        fi
    fi;
    ahead = 0
}

/* pop_confirm into pg/pr: the oldest confirmation waiting for rank q, if any. */
inline pop_confirm(q)
{
    pg = 0;
    pr = 0;
    if
    :: ringcnt[q] > 0 ->
        pg = ring[q * S] % 4;
        pr = ring[q * S] / 4;
        d_step {
            j = 0;
            do
            :: j + 1 < ringcnt[q] -> ring[q * S + j] = ring[q * S + j + 1]; j++
            :: else -> break
            od;
            ring[q * S + ringcnt[q] - 1] = 0;
            ringcnt[q]--;
            j = 0
        }
    :: else -> skip
    fi
}

/* The switch's handling of the packets of one (worker, slot) pair. */
proctype Port(byte w; byte s)
{
    byte b = w * S + s;
    byte i, k, q, j, r, pg, pr, n;
    short ahead;
    int m, x;

end:
    do
    :: atomic {
        upcnt[b] > 0 ->
        up_recv(b, i, m);
        if
        :: m != 0 && UP_KIND(m) == 1 -> p4_ack(s, w, UP_ROUND(m), 0)
        :: m != 0 && UP_KIND(m) == 0 ->
            if
            :: UP_PG(m) != 0 -> p4_ack(UP_PG(m) - 1, w, UP_PR(m), 1)
            :: else -> skip
            fi;
            /* p4slot_contribute */
            r = UP_ROUND(m);
            ahead = r - srnd[s];
            if
            :: ahead < 0 -> skip /* STALE */
            :: ahead > 0 -> skip /* AHEAD */
            :: ahead == 0 && sph[s] == P4_ACKING ->
                /* RESEND_RESULT, carrying a waiting confirmation */
                pop_confirm(w);
                dn_put(b, DN(0, r, pg, pr, res[s]))
            :: ahead == 0 && sph[s] == P4_AGGREGATING && (aggbm[s] & (1 << w)) != 0 && BROKEN != 2 ->
                skip /* DUP_OPEN */
            :: else ->
                rows[s * W + w] = VAL(w, r * S + s);
                aggbm[s] = aggbm[s] | (1 << w);
                aggcnt[s]++;
                assert(aggcnt[s] <= W);
                if
                :: aggcnt[s] >= W ->
                    /* COMPLETE: the previous round's result goes; every rank has it */
                    q = 0;
                    do
                    :: q < W ->
                        assert(r == 0 || (got[q] & (1 << ((r - 1) * S + s))) != 0);
                        q++
                    :: else -> break
                    od;
                    x = 0;
                    q = 0;
                    do
                    :: q < W -> x = x + rows[s * W + q]; q++
                    :: else -> break
                    od;
                    res[s] = x;
                    sph[s] = P4_ACKING;
                    ackbm[s] = 0;
                    ackcnt[s] = 0;
                    q = 0;
                    do
                    :: q < W ->
                        pop_confirm(q);
                        dn_put(q * S + s, DN(0, r, pg, pr, res[s]));
                        q++
                    :: else -> break
                    od
                :: else -> skip /* PARTIAL */
                fi
            fi
        :: else -> skip
        fi;
        m = 0; x = 0; r = 0; q = 0; pg = 0; pr = 0; ahead = 0
       }
    od
}

init
{
    byte w, s;
    atomic {
        w = 0;
        do
        :: w < W ->
            s = 0;
            do
            :: s < S -> run Port(w, s); run Worker(w, s); s++
            :: else -> break
            od;
            w++
        :: else -> break
        od
    }
}
