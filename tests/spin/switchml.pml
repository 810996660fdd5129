/*
 * switchml.pml - the switchml slot protocol (docs/PROTOCOL.md sections 2 and 3) as a Promela
 * model: the switch's two-copy slot of src/switchd/server/slot.c (slot_contribute, full round numbers
 * per copy, first contribution overwrites, multicast on completion, resend of a complete round
 * to the sender, a copy reused only when both its last round and the other copy's round are
 * complete) and the worker engine of src/lib/worker/engine.c (one packet in flight per slot, chunk
 * c on slot c % S, the result's round must equal the round in flight, a timer that resends the
 * packet in flight (see TIMER_OK for when it fires), the exponent probe and the look-ahead
 * exponent of block fixed point).
 *
 * Network: every (worker, slot) pair has a bag towards the switch and a bag back. A bag is a
 * multiset (sorted array): any packet in it can be delivered next (reordering, arbitrary
 * delay). Its consumer may instead lose the packet (at most LOSS times in a run) or process
 * it and leave a copy behind (a duplicate, at most DUPS times).
 *
 * Build-time parameters (spin -D...): W workers, S slots, NCH chunks per worker, FIXED (1:
 * block fixed point with probe rounds and look-ahead; 0: int32, no exponents), LOSS, DUPS,
 * BROKEN (0: the code as written; 1..4: deliberately broken variants, see below).
 *
 * Safety (assertions): every delivered result is the sum of every rank's share of that chunk,
 * each counted once; every chunk is delivered once per worker; each round completes once;
 * a copy's count never exceeds W; a copy is overwritten only when every worker holds its
 * result; every rank scales a chunk with the same exponent, the maximum of everyone's.
 * Liveness (ltl `live`, checked with weak fairness): every worker delivers every chunk.
 */

#ifndef W
#define W 2
#endif
#ifndef S
#define S 2
#endif
#ifndef NCH
#define NCH 4
#endif
#ifndef FIXED
#define FIXED 1
#endif
#ifndef LOSS
#define LOSS 1
#endif
#ifndef DUPS
#define DUPS 1
#endif
#ifndef BROKEN
#define BROKEN 0
#endif
/* BROKEN variants:
 *   1  a duplicate to an open round is added again (the seen bitmap is not consulted)
 *   2  one pool-version bit instead of full round numbers: a delayed duplicate of round r is
 *      taken for round r + 2 (no STALE verdict)
 *   3  a duplicate to a complete round is ignored instead of answered (no RESEND)
 *   4  the look-ahead keeps the last contribution's exponent instead of the maximum
 */

#define CAP 3          /* packets a bag holds */
/* When a timer may fire. Default: when nothing else in the system can move (Promela's
 * timeout), i.e. after a loss. An earlier timeout only adds a copy of a packet that has not
 * changed: a copy of a packet still in flight is a duplicate (DUPS), a copy of a lost one is
 * the lost packet delivered late (the bags delay arbitrarily), so no behaviour is missed
 * beyond the DUPS bound. EAGER_TIMERS: any time while the bag has room for two more (much
 * larger state space).
 * LIVENESS: the timer of a packet that sits in an open round stays quiet. Such a resend can
 * only be ignored (DUP_OPEN); with a timeout guard it could keep the system busy forever and
 * starve the worker whose packet was lost, which weak fairness cannot exclude because a
 * timeout guard is never continuously enabled. Real timers are per packet and independent. */
#define SEEN_OPEN(w, s, r) \
    (crnd[2 * (s) + (r) % 2] == (r) + 2 && (cseen[2 * (s) + (r) % 2] & (1 << (w))) != 0 && \
     ccnt[2 * (s) + (r) % 2] < W)
#ifdef EAGER_TIMERS
#define TIMER_OK(w, s, b) (upcnt[b] + 2 <= CAP)
#elif defined(LIVENESS)
#define TIMER_OK(w, s, b) (timeout && !SEEN_OPEN(w, s, wround[b]))
#else
#define TIMER_OK(w, s, b) (timeout)
#endif
#define NB (W * S)     /* (worker, slot) pairs: bag b = w * S + s */
#if FIXED + (NCH + S - 1) / S > 14 || W > 3 || NCH > 15
#error "the packet fields hold rounds 0..13, ranks 0..2 and chunks 0..14"
#endif

#define V_PARTIAL 0
#define V_COMPLETE 1
#define V_RESEND 2
#define V_DUP_OPEN 3
#define V_STALE 4
#define V_AHEAD 5
#define V_MISMATCH 6

#define IDLE 0
#define PROBE 1
#define DATA 2

/* A contribution: round, exp, next_exp (its payload follows from sender and round). */
#define UP(r, e, n) ((r) + 1 + 16 * (e) + 64 * (n))
#define UP_ROUND(m) ((m) % 16 - 1)
#define UP_EXP(m) (((m) / 16) % 4)
#define UP_NEXP(m) ((m) / 64)
/* A result: round, exp, next_exp, the sum. */
#define DN(r, e, n, x) ((r) + 1 + 16 * (e) + 64 * (n) + 256 * (x))
#define DN_ROUND(m) ((m) % 16 - 1)
#define DN_EXP(m) (((m) / 16) % 4)
#define DN_NEXP(m) (((m) / 64) % 4)
#define DN_SUM(m) ((m) / 256)

/* Rank w's block exponent of chunk c (ranks disagree on some chunks); 0 is the all-zero
 * sentinel (no such chunk). AGREED is their maximum. */
#define EXPO(w, c) ((c) % 3 == 0 -> 1 : 1 + ((w) + (c)) % 2)
#define AGREED(c) ((c) % 3 == 0 -> 1 : (W > 1 -> 2 : 1 + (c) % 2))
/* Rank w's share of chunk c, in a field of its own: a sum is right only if every rank's
 * share of that very chunk went in exactly once. */
#define VAL(w, c) (((c) + 1) << (5 * (w)))
#define SUMX(c) (((c) + 1) * (((1 << (5 * W)) - 1) / 31))
/* Round r of slot s: a probe (FIXED, r == 0) or chunk CHUNK(s, r). */
#define IS_DATA(r) ((r) >= FIXED)
#define CHUNK(s, r) ((s) + ((r) - FIXED) * S)

short up[NB * CAP];     /* bags towards the switch, sorted, 0 = empty */
byte upcnt[NB];
int dn[NB * CAP];       /* bags towards the workers */
byte dncnt[NB];
byte nloss, ndup;       /* faults spent */

/* Switch: copy v of slot s is index 2 * s + v. Rounds are stored + 2 (round -2 is 0). */
byte crnd[2 * S];
byte ccnt[2 * S];
byte cseen[2 * S];
bit cdata[2 * S];       /* 0: a probe round (count 0), 1: data */
byte cexp[2 * S];
byte cnexp[2 * S];
int csum[2 * S];

/* Workers, per (worker, slot). */
byte wround[NB];        /* round in flight, or the next one when idle */
byte wphase[NB];
byte wchunk[NB];
byte wexp[NB];          /* agreed exponent of the chunk in flight */
byte wsent[NB];         /* look-ahead exponent sent with the packet in flight */
short wpkt[NB];         /* the packet in flight, resent as is */

/* Ghosts. */
int got[W];             /* bit c: chunk c delivered to that worker */
short ncomp[S];         /* bit r: round r of slot s completed */
byte ndone;             /* (worker, slot) pairs that delivered all their chunks */

ltl live { <> (ndone == NB) }

/* The bags. Promela inlines take no arrays, so each operation is spelled for both
 * directions: XX_put(b, x) puts x into bag b, kept sorted (blocks while the bag is full);
 * XX_pick(b, i) chooses any packet of a non-empty bag (equal packets once); XX_take(b, i, x)
 * removes packet i into x; XX_recv(b, i, x) receives: delivers (x != 0), loses (x == 0) or
 * delivers a duplicate that stays in flight. */
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

/* engine.c send_current: build the packet for the slot's phase and chunk, and send it. */
inline send_current(b, w)
{
    if
    :: wphase[b] == PROBE ->
        wsent[b] = EXPO(w, wchunk[b]);
        wpkt[b] = UP(wround[b], 0, wsent[b])
    :: wphase[b] == DATA && FIXED ->
        /* look-ahead: every rank encodes this chunk with the maximum exponent */
        assert(wexp[b] == AGREED(wchunk[b]));
        wsent[b] = (wchunk[b] + S < NCH -> EXPO(w, wchunk[b] + S) : 0);
        wpkt[b] = UP(wround[b], wexp[b], wsent[b])
    :: wphase[b] == DATA && !FIXED ->
        wpkt[b] = UP(wround[b], 0, 0)
    fi;
    assert(upcnt[b] < CAP); /* a fresh packet always finds room (retransmissions leave one) */
    up_put(b, wpkt[b])
}

proctype Worker(byte w; byte s)
{
    byte b = w * S + s;
    byte i, k, c, ok;
    int m;

    atomic {
        if
        :: s < NCH ->
            wchunk[b] = s;
            wphase[b] = (FIXED -> PROBE : DATA);
            send_current(b, w)
        :: else -> ndone++
        fi
    }
end:
    do
    :: atomic {
        dncnt[b] > 0 ->
        dn_recv(b, i, m);
        /* engine.c accept_result */
        ok = (m != 0 && wphase[b] != IDLE && DN_ROUND(m) == wround[b]);
        if
        :: ok && FIXED && wphase[b] == DATA && DN_EXP(m) != wexp[b] -> ok = 0
        :: ok && FIXED && DN_NEXP(m) != 0 && DN_NEXP(m) < wsent[b] -> ok = 0
        :: else -> skip
        fi;
        if
        :: ok ->
            wround[b]++;
            if
            :: wphase[b] == PROBE ->
                wexp[b] = DN_NEXP(m);
                wphase[b] = DATA;
                send_current(b, w)
            :: else ->
                c = wchunk[b];
                assert(DN_SUM(m) == SUMX(c));
                assert((got[w] & (1 << c)) == 0);
                got[w] = got[w] | (1 << c);
                wchunk[b] = c + S;
                if
                :: wchunk[b] < NCH ->
                    wexp[b] = DN_NEXP(m);
                    send_current(b, w)
                :: else ->
                    wphase[b] = IDLE;
                    ndone++
                fi
            fi
        :: else -> skip
        fi;
        m = 0; c = 0; ok = 0
       }
    :: atomic {
        /* the timer: the packet in flight again, the same bytes */
        wphase[b] != IDLE && TIMER_OK(w, s, b) ->
        up_put(b, wpkt[b])
       }
    od
}

/* The switch's handling of the contributions of one (worker, slot) pair. */
proctype Port(byte w; byte s)
{
    byte b = w * S + s;
    byte i, k, r, ci, oi, v, q;
    short ahead;
    int m, x;

end:
    do
    :: atomic {
        upcnt[b] > 0 ->
        up_recv(b, i, m);
        if
        :: m != 0 ->
            /* slot.c slot_contribute */
            r = UP_ROUND(m);
            ci = 2 * s + r % 2;
            oi = 2 * s + 1 - r % 2;
            ahead = r + 2 - crnd[ci];
            if
            :: ahead < 0 && BROKEN != 2 -> v = V_STALE
            :: ahead > 0 ->
                if
                :: ahead != 2 || ccnt[ci] != W || crnd[oi] + 1 != r + 2 || ccnt[oi] != W ->
                    v = V_AHEAD
                :: else ->
                    /* start_round: the copy's last round goes; every worker must have it */
                    q = 0;
                    do
                    :: q < W -> assert(wround[q * S + s] + 1 >= crnd[ci]); q++
                    :: else -> break
                    od;
                    q = 0;
                    crnd[ci] = r + 2;
                    ccnt[ci] = 0;
                    cseen[ci] = 0;
                    cdata[ci] = IS_DATA(r);
                    cexp[ci] = UP_EXP(m);
                    cnexp[ci] = UP_NEXP(m);
                    csum[ci] = (IS_DATA(r) -> VAL(w, CHUNK(s, r)) : 0);
                    v = V_PARTIAL
                fi
            :: else -> /* the round the copy holds (BROKEN 2: or an older one) */
                if
                :: (cseen[ci] & (1 << w)) != 0 && ccnt[ci] == W ->
                    v = (BROKEN == 3 -> V_DUP_OPEN : V_RESEND)
                :: (cseen[ci] & (1 << w)) != 0 && ccnt[ci] < W && BROKEN != 1 ->
                    v = V_DUP_OPEN
                :: else -> /* add_to_round */
                    if
                    :: cdata[ci] != IS_DATA(r) || (FIXED && cdata[ci] && UP_EXP(m) != cexp[ci]) ->
                        v = V_MISMATCH
                    :: else ->
                        csum[ci] = csum[ci] + (IS_DATA(r) -> VAL(w, CHUNK(s, r)) : 0);
                        if
                        :: BROKEN == 4 -> cnexp[ci] = UP_NEXP(m)
                        :: BROKEN != 4 && UP_NEXP(m) > cnexp[ci] -> cnexp[ci] = UP_NEXP(m)
                        :: else -> skip
                        fi;
                        v = V_PARTIAL
                    fi
                fi
            fi;
            if
            :: v == V_PARTIAL ->
                cseen[ci] = cseen[ci] | (1 << w);
                ccnt[ci]++;
                assert(ccnt[ci] <= W);
                if
                :: ccnt[ci] >= W ->
                    v = V_COMPLETE;
                    assert((ncomp[s] & (1 << (crnd[ci] - 2))) == 0);
                    ncomp[s] = ncomp[s] | (1 << (crnd[ci] - 2))
                :: else -> skip
                fi
            :: else -> skip
            fi;
            x = DN(crnd[ci] - 2, cexp[ci], cnexp[ci], csum[ci]);
            if
            :: v == V_COMPLETE ->
                /* multicast the result (a full bag delays the switch, it drops nothing) */
                q = 0;
                do
                :: q < W -> dn_put(q * S + s, x); q++
                :: else -> break
                od
            :: v == V_RESEND -> dn_put(b, x)
            :: else -> skip
            fi
        :: else -> skip
        fi;
        m = 0; x = 0; r = 0; ci = 0; oi = 0; v = 0; q = 0; ahead = 0
       }
    od
}

init
{
    byte w, s;
    atomic {
        s = 0;
        do
        :: s < S ->
            crnd[2 * s] = 0;       /* round -2, complete */
            crnd[2 * s + 1] = 1;   /* round -1, complete */
            ccnt[2 * s] = W;
            ccnt[2 * s + 1] = W;
            cseen[2 * s] = (1 << W) - 1;
            cseen[2 * s + 1] = (1 << W) - 1;
            s++
        :: else -> break
        od;
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
