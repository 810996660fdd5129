/*
 * failover.pml - switch fail-over with per-chunk recovery (docs/VERIFICATION.md section 1.5) as
 * a Promela model: W ranks run NOPS allreduces of NCH chunks each over the switchml slot
 * protocol of switchml.pml (int32: no probe rounds, no exponents; the two-copy slot with full
 * round numbers, first contribution overwrites, multicast on completion, RESEND to a duplicate
 * of a complete round; one packet in flight per slot on the rank's side, chunk c of an
 * allreduce on slot c % S), and a switch that may crash at any step. A crash loses the
 * switch's state, shadow copies included; the next generation's switch starts empty.
 *
 * The fail-over as designed:
 *  - generations: every packet carries its generation (the JOIN's token); the switch takes only
 *    its own generation's contributions and a rank takes only its own generation's results.
 *  - detection: a rank whose switch crashed sees it at some point (closed connection, SHUTDOWN
 *    or silence: which one does not matter here), at any step of its own, and moves to g + 1:
 *    it drops what it had in flight and JOINs generation g + 1; the switch admits a generation
 *    when every rank joined it.
 *  - per-chunk state: each rank holds, for its lowest unfinished op u, which chunks are results
 *    (SUM) and which still its input (INPUT), and a copy of op u - 1's result.
 *  - recovery, through ordinary allreduces on the new switch: (1) the state exchange: every
 *    rank contributes, in a field of its own, u and its holder bit for each chunk (a vector
 *    indexed by rank); m = the minimum u; the holders of a chunk of op m are the ranks at
 *    m + 1 (their copy) and the ranks at m holding it; (2) the data exchange for op m, when
 *    m < NOPS: a chunk held by every rank is exchanged as zeros and its result ignored; a chunk
 *    held by some: the lowest holder contributes the sum, the others 0; a chunk held by nobody:
 *    every rank contributes its input; (3) then ops m + 1 .. NOPS - 1 from inputs, as normal.
 *    A rank that has finished its last op still takes part (the others may need its copy).
 *  - a frozen switch that wakes up (ZOMBIE=1): the crashed generation's switch keeps its state
 *    and may go on taking that generation's contributions and multicasting its results, until
 *    the next crash (one such switch at a time).
 *
 * Network: as in switchml.pml, one bag per (rank, slot) and direction; any packet of a bag can
 * come next; its consumer may lose it (LOSS times in a run) or leave a copy in flight (DUPS
 * times). The bags are shared across generations: a packet of an old generation can arrive
 * arbitrarily late.
 *
 * Parameters (spin -D...): W ranks (2..3), S slots (1..2), NCH chunks per op (S..2), NOPS ops
 * (1..2), CRASHES (switch crashes in a run), LOSS, DUPS, ZOMBIE, BROKEN (0: the design; see
 * below), GENASSERT (1: assert the generation of every accepted packet; 0: leave the harm of a
 * stale packet to the exactly-once assertions).
 *
 * Safety (assertions): every result a rank accepts for a chunk of an op is the sum of every
 * rank's input to that chunk, each counted once, and a chunk is taken once per rank; no rank
 * or switch accepts a packet of another generation; the ranks are at most one op apart at a
 * recovery, and a rank one op ahead holds nothing of its current op; a rank that finished the
 * recovered op holds all of it; a quiet system with nothing in flight has every rank done
 * (no rank waits forever on a join or a recovery). Liveness (ltl `live`, weak fairness):
 * with at most CRASHES crashes every rank completes every op.
 */

#ifndef W
#define W 2
#endif
#ifndef S
#define S 2
#endif
#ifndef NCH
#define NCH 2
#endif
#ifndef NOPS
#define NOPS 2
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef LOSS
#define LOSS 1
#endif
#ifndef DUPS
#define DUPS 1
#endif
#ifndef ZOMBIE
#define ZOMBIE 1
#endif
#ifndef GENASSERT
#define GENASSERT 1
#endif
#ifndef BROKEN
#define BROKEN 0
#endif
/* BROKEN variants:
 *   1  no copy of the previous op's result: a rank one op ahead, the lowest holder of a chunk,
 *      contributes what its buffer holds now (its next op's input) instead of the sum
 *   2  every holder of a chunk contributes its sum (no lowest-holder election)
 *   3  a rank accepts a result of an older generation (no token check on results)
 *   4  the switch accepts a contribution of an older generation (no token check at the switch)
 *   5  a rank that has finished its last op does not take part in a recovery
 *   6  a rank keeps its slots' round numbers across a rejoin (the new switch's slots start at
 *      round 0)
 *   7  the state exchange without the ranks' own op numbers: the op numbers are summed (m is
 *      still the sum divided by W, as the ranks are at most one op apart) and each rank's bit
 *      says whether it holds the chunk of its own lowest unfinished op, so nobody can tell a
 *      rank one op ahead (a holder, by its copy) from a rank at m that holds nothing. The
 *      ranks at m elect the lowest rank whose bit is set; a rank ahead, which learns from m
 *      that it is ahead, supplies its copy where no bit is set.
 */

#define CAP 3
#define NB (W * S)
/* When a timer may fire: see switchml.pml. LIVENESS: the timer of a packet already counted in
 * the open round of its own generation's switch stays quiet. */
#define SEEN_OPEN(w, s, r) \
    (wgen[w] == sgen && crnd[2 * (s) + (r) % 2] == (r) + 2 && \
     (cseen[2 * (s) + (r) % 2] & (1 << (w))) != 0 && ccnt[2 * (s) + (r) % 2] < W)
#ifdef LIVENESS
#define TIMER_OK(w, b) (timeout && !SEEN_OPEN(w, (b) % S, wr[b]))
#else
#define TIMER_OK(w, b) (timeout)
#endif
#define ALLW ((1 << W) - 1)
#define ALLCH ((1 << NCH) - 1)
#if W > 3 || W < 2 || S > 2 || S < 1 || NCH > 2 || NCH < S || NOPS > 2 || CRASHES > 2
#error "the model holds 2..3 ranks, 1..2 slots, S..2 chunks, up to 2 ops and 2 crashes"
#endif

/* Rank phases. */
#define JOIN 0   /* waiting for the switch of its generation to admit every rank */
#define STATEX 1 /* recovery, the state exchange */
#define DATAX 2  /* recovery, the data exchange of op m */
#define OPS 3    /* running op wu */
#define DONE 4   /* every op finished */

/* What a rank contributes to a chunk of the data exchange. */
#define C_ZERO 0
#define C_SUM 1
#define C_INPUT 2

/* A packet: generation, round (per slot, from 0 in each generation), value. */
#define PK(g, r, v) (1 + (r) + 16 * (g) + 64 * (v))
#define PK_ROUND(m) (((m) - 1) % 16)
#define PK_GEN(m) ((((m) - 1) / 16) % 4)
#define PK_VAL(m) (((m) - 1) / 64)

/* Rank w's input to chunk c of op n, in a field of its own: a sum is right only if every
 * rank's input to that very chunk went in exactly once. */
#define VAL(w, n, c) (((n) * NCH + (c) + 1) << (5 * (w)))
#define SUMX(n, c) (((n) * NCH + (c) + 1) * (((1 << (5 * W)) - 1) / 31))
/* Rank w's field of the state exchange for chunk c: 1 + 2u + (holds chunk c of op u). */
#define STF(w, c) (1 + 2 * wu[w] + ((hold[w] >> (c)) & 1))

int up[NB * CAP];
byte upcnt[NB];
int dn[NB * CAP];
byte dncnt[NB];
byte nloss, ndup, ncrash;

/* Switch: copy v of slot s of the live switch is index 2 * s + v; the frozen one's (ZOMBIE),
 * 2 * S + 2 * s + v. Rounds are stored + 2 (round -2 is 0). */
byte sgen;              /* the live switch's generation */
bit zalive;             /* a frozen switch of generation sgen - 1 holds its state */
byte jbits;             /* ranks that joined generation sgen */
byte crnd[4 * S];
byte ccnt[4 * S];
byte cseen[4 * S];
int csum[4 * S];

/* Ranks. */
byte wgen[W];
byte wph[W];
byte wu[W];             /* lowest unfinished op */
byte hold[W];           /* bit c: chunk c of op wu is a result (SUM) */
byte wbits[W];          /* chunks of the allreduce in progress received */
byte wm[W];             /* recovery: the op recovered (minimum over ranks) */
byte dval[W * NCH];     /* recovery: what this rank contributes to each data chunk */
/* Per (rank, slot). */
bit busy[NB];           /* a packet in flight */
byte wr[NB];            /* round in flight, or the next one */
byte wch[NB];           /* chunk in flight */
int wpkt[NB];           /* the packet in flight, resent as is */

/* Ghosts. */
byte ndone;             /* ranks that finished every op */
short ncomp[2 * S];     /* bit r: round r of slot s completed, live switch then frozen one */

ltl live { <> (ndone == W) }

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

/* The live switch of generation sgen crashes: with ZOMBIE it is only frozen and keeps its
 * state as generation sgen - 1's switch; a fresh switch (empty slots) serves sgen + 1. */
inline crash()
{
    ncrash++;
    q = 0;
    do
    :: q < 2 * S ->
        if
        :: ZOMBIE ->
            crnd[2 * S + q] = crnd[q];
            ccnt[2 * S + q] = ccnt[q];
            cseen[2 * S + q] = cseen[q];
            csum[2 * S + q] = csum[q]
        :: else -> skip
        fi;
        crnd[q] = q % 2;   /* rounds -2 and -1, complete */
        ccnt[q] = W;
        cseen[q] = ALLW;
        csum[q] = 0;
        q++
    :: else -> break
    od;
    q = 0;
    do
    :: q < S -> ncomp[S + q] = (ZOMBIE -> ncomp[q] : 0); ncomp[q] = 0; q++
    :: else -> break
    od;
    q = 0;
    zalive = ZOMBIE;
    sgen++;
    jbits = 0
}

/* The first rank to send for the next allreduce's chunk c on slot b: the value by phase. */
inline send_chunk(w, b, c)
{
    if
    :: wph[w] == STATEX -> x = STF(w, c) << (5 * w)
    :: wph[w] == DATAX && dval[w * NCH + c] == C_ZERO -> x = 0
    :: wph[w] == DATAX && dval[w * NCH + c] == C_INPUT -> x = VAL(w, wm[w], c)
    :: wph[w] == DATAX && dval[w * NCH + c] == C_SUM ->
        /* its result, from the buffer (at m) or from the copy of op m (at m + 1); BROKEN 1:
         * there is no copy, and the buffer holds the user's next input */
        x = (BROKEN == 1 && wu[w] != wm[w] -> VAL(w, wu[w], c) : SUMX(wm[w], c))
    :: wph[w] == OPS -> x = VAL(w, wu[w], c)
    fi;
    wch[b] = c;
    busy[b] = 1;
    wpkt[b] = PK(wgen[w], wr[b], x);
    up_put(b, wpkt[b]);
    x = 0
}

inline start_allreduce(w)
{
    wbits[w] = 0;
    s = 0;
    do
    :: s < S -> send_chunk(w, w * S + s, s); s++
    :: else -> break
    od;
    s = 0
}

/* After an op finished (or the data exchange): the next op, or done. */
inline next_op(w)
{
    if
    :: wu[w] < NOPS -> wph[w] = OPS; start_allreduce(w)
    :: else -> wph[w] = DONE
    fi
}

inline finish_op(w)
{
    assert(hold[w] == ALLCH);
    hold[w] = 0;
    wu[w]++;
    if
    :: wu[w] == NOPS -> ndone++
    :: else -> skip
    fi
}

/* BROKEN 7: what a rank can decide from the summed op numbers and the holder bits. */
inline decode_summed(w, c, v)
{
    f = 0;
    nh = 0;
    lh = W;
    q = W;
    do
    :: q > 0 ->
        q--;
        f = f + (((v >> (5 * q)) & 31) - 1) / 2;
        if
        :: (((v >> (5 * q)) & 31) - 1) % 2 == 1 -> nh++; lh = q
        :: else -> skip
        fi
    :: else -> break
    od;
    wm[w] = f / W;
    if
    :: wu[w] > wm[w] -> dval[w * NCH + c] = (nh == 0 -> C_SUM : C_ZERO)
    :: wu[w] == wm[w] && nh == 0 -> dval[w * NCH + c] = C_INPUT
    :: wu[w] == wm[w] && nh > 0 -> dval[w * NCH + c] = (lh == w -> C_SUM : C_ZERO)
    :: else -> skip
    fi
}

/* The state exchange's result for chunk c: every rank's u and holder bit of chunk c. */
inline decode_state(w, c, v)
{
    /* m: the lowest unfinished op over ranks */
    wm[w] = NOPS;
    q = 0;
    do
    :: q < W ->
        f = (v >> (5 * q)) & 31;
        if
        :: f >= 1 && (f - 1) / 2 < wm[w] -> wm[w] = (f - 1) / 2
        :: else -> skip
        fi;
        q++
    :: else -> break
    od;
    /* the holders of chunk c of op m, the lowest of them, and whether all hold it */
    nh = 0;
    lh = W;
    q = W;
    do
    :: q > 0 ->
        q--;
        f = (v >> (5 * q)) & 31;
        if
        :: f >= 1 && ((f - 1) / 2 > wm[w] || ((f - 1) / 2 == wm[w] && (f - 1) % 2 == 1)) ->
            nh++;
            lh = q;
            if
            :: q == w -> me = 1
            :: else -> skip
            fi
        :: else -> skip
        fi
    :: else -> break
    od;
    if
    :: BROKEN == 7 -> decode_summed(w, c, v)
    :: else -> skip
    fi;
    if
    :: BROKEN == 7 -> skip
    :: BROKEN != 7 && nh == W -> dval[w * NCH + c] = C_ZERO
    :: BROKEN != 7 && nh == 0 -> dval[w * NCH + c] = C_INPUT
    :: BROKEN != 7 && nh > 0 && nh < W && (lh == w || (BROKEN == 2 && me)) -> dval[w * NCH + c] = C_SUM
    :: BROKEN != 7 && nh > 0 && nh < W && !(lh == w || (BROKEN == 2 && me)) ->
        dval[w * NCH + c] = C_ZERO
    fi;
    q = 0; f = 0; nh = 0; lh = 0; me = 0
}

/* The allreduce in progress has every chunk's result: on to the next step. */
inline allreduce_done(w)
{
    if
    :: wph[w] == STATEX && wm[w] == NOPS -> assert(wu[w] == NOPS); wph[w] = DONE
    :: wph[w] == STATEX && wm[w] < NOPS ->
        /* the design's claim: ranks are at most one op apart */
        assert(wu[w] == wm[w] || wu[w] == wm[w] + 1);
        wph[w] = DATAX;
        start_allreduce(w)
    :: wph[w] == DATAX ->
        if
        :: wu[w] == wm[w] -> finish_op(w)
        :: else -> assert(hold[w] == 0) /* one op ahead: nothing of op m + 1 came back */
        fi;
        q = 0;
        do
        :: q < NCH -> dval[w * NCH + q] = 0; q++
        :: else -> break
        od;
        q = 0;
        wm[w] = 0;
        next_op(w)
    :: wph[w] == OPS -> finish_op(w); next_op(w)
    fi
}

proctype Rank(byte w)
{
    byte b, i, k, c, s, q, f, nh, lh, me;
    int m, x;

    atomic { wph[w] = OPS; start_allreduce(w) }
end:
    do
    :: atomic {
        /* a packet from the switch, on either slot; taken in any phase */
        if
        :: dncnt[w * S] > 0 -> b = w * S
        :: S > 1 && dncnt[w * S + S - 1] > 0 -> b = w * S + S - 1
        fi;
        dn_recv(b, i, m);
        if
        :: m != 0 && busy[b] && PK_ROUND(m) == wr[b] && (PK_GEN(m) == wgen[w] || BROKEN == 3) ->
            assert(!GENASSERT || PK_GEN(m) == wgen[w]);
            x = PK_VAL(m);
            c = wch[b];
            busy[b] = 0;
            wr[b]++;
            assert((wbits[w] & (1 << c)) == 0);
            wbits[w] = wbits[w] | (1 << c);
            if
            :: wph[w] == STATEX -> decode_state(w, c, x)
            :: wph[w] == DATAX && wu[w] == wm[w] && (hold[w] & (1 << c)) == 0 ->
                assert(x == SUMX(wm[w], c));
                hold[w] = hold[w] | (1 << c)
            :: wph[w] == DATAX && !(wu[w] == wm[w] && (hold[w] & (1 << c)) == 0) ->
                skip /* held already, or one op ahead: the result is not needed */
            :: wph[w] == OPS ->
                assert(x == SUMX(wu[w], c));
                assert((hold[w] & (1 << c)) == 0);
                hold[w] = hold[w] | (1 << c)
            fi;
            x = 0;
            if
            :: c + S < NCH -> send_chunk(w, b, c + S)
            :: else -> skip
            fi;
            if
            :: wbits[w] == ALLCH -> allreduce_done(w)
            :: else -> skip
            fi
        :: else -> skip /* lost, stale, or not the round in flight: dropped */
        fi;
        b = 0; m = 0; c = 0
       }
    :: atomic {
        /* the timer: the packet in flight again, the same bytes */
        busy[w * S] && upcnt[w * S] < CAP && TIMER_OK(w, w * S) -> up_put(w * S, wpkt[w * S])
       }
    :: atomic {
        S > 1 && busy[w * S + S - 1] && upcnt[w * S + S - 1] < CAP && TIMER_OK(w, w * S + S - 1) ->
        up_put(w * S + S - 1, wpkt[w * S + S - 1])
       }
    :: atomic {
        /* detection: this rank's switch is gone; it drops what it had in flight and joins
         * the next generation (BROKEN 5: not once it finished every op) */
        wgen[w] < sgen && (BROKEN != 5 || wph[w] != DONE) ->
        wgen[w]++;
        wph[w] = JOIN;
        wbits[w] = 0;
        wm[w] = 0;
        s = 0;
        do
        :: s < S ->
            busy[w * S + s] = 0;
            wr[w * S + s] = (BROKEN == 6 -> wr[w * S + s] : 0);
            wch[w * S + s] = 0;
            wpkt[w * S + s] = 0;
            s++
        :: else -> break
        od;
        s = 0;
        do
        :: s < NCH -> dval[w * NCH + s] = 0; s++
        :: else -> break
        od;
        s = 0;
        if
        :: wgen[w] == sgen -> jbits = jbits | (1 << w)
        :: else -> skip
        fi
       }
    :: atomic {
        /* every rank joined this generation: the recovery starts with the state exchange */
        wph[w] == JOIN && wgen[w] == sgen && jbits == ALLW ->
        wph[w] = STATEX;
        start_allreduce(w)
       }
    od
}

/* The switch's handling of one contribution by the switch at offset zb (0: the live one,
 * 2 * S: the frozen one) of generation g, as slot.c's slot_contribute does it for int32. */
inline contribute(w, s, b, m, zb, g)
{
    assert(!GENASSERT || PK_GEN(m) == g);
    r = PK_ROUND(m);
    ci = zb + 2 * s + r % 2;
    oi = zb + 2 * s + 1 - r % 2;
    ahead = r + 2 - crnd[ci];
    if
    :: ahead < 0 -> v = 4 /* STALE */
    :: ahead > 0 ->
        if
        :: ahead != 2 || ccnt[ci] != W || crnd[oi] + 1 != r + 2 || ccnt[oi] != W -> v = 5 /* AHEAD */
        :: else ->
            /* the copy's last round goes: every rank of this generation has its result */
            q = 0;
            do
            :: q < W -> assert(wgen[q] != g || wr[q * S + s] + 1 >= crnd[ci]); q++
            :: else -> break
            od;
            q = 0;
            crnd[ci] = r + 2;
            ccnt[ci] = 0;
            cseen[ci] = 0;
            csum[ci] = PK_VAL(m);
            v = 0 /* PARTIAL */
        fi
    :: else ->
        if
        :: (cseen[ci] & (1 << w)) != 0 && ccnt[ci] == W -> v = 2 /* RESEND */
        :: (cseen[ci] & (1 << w)) != 0 && ccnt[ci] < W -> v = 3 /* DUP_OPEN */
        :: else -> csum[ci] = csum[ci] + PK_VAL(m); v = 0
        fi
    fi;
    if
    :: v == 0 ->
        cseen[ci] = cseen[ci] | (1 << w);
        ccnt[ci]++;
        assert(ccnt[ci] <= W);
        if
        :: ccnt[ci] >= W ->
            v = 1; /* COMPLETE */
            assert((ncomp[zb / 2 + s] & (1 << r)) == 0);
            ncomp[zb / 2 + s] = ncomp[zb / 2 + s] | (1 << r)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    x = PK(g, crnd[ci] - 2, csum[ci]);
    if
    :: v == 1 ->
        /* multicast; the live switch may crash between any two sends */
        q = 0;
        do
        :: q < W ->
            if
            :: zb == 0 && ncrash < CRASHES -> crash(); break
            :: dn_put(q * S + s, x); q++
            fi
        :: else -> break
        od
    :: v == 2 -> dn_put(b, x)
    :: else -> skip
    fi
}

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
        :: m == 0 -> skip
        :: m != 0 && PK_GEN(m) == sgen && ncrash < CRASHES -> crash() /* dies on taking it */
        :: m != 0 && PK_GEN(m) == sgen ->
            contribute(w, s, b, m, 0, sgen);
            /* or right after it: a crash at any moment is a crash right after the switch's
             * last step (what the ranks do in between does not depend on it) */
            if
            :: ncrash < CRASHES && PK_GEN(m) == sgen -> crash()
            :: skip
            fi
        :: m != 0 && PK_GEN(m) < sgen && BROKEN == 4 -> contribute(w, s, b, m, 0, sgen)
        :: m != 0 && PK_GEN(m) + 1 == sgen && zalive ->
            contribute(w, s, b, m, 2 * S, sgen - 1) /* the frozen switch wakes up */
        :: m != 0 && PK_GEN(m) < sgen && BROKEN != 4 -> skip /* stale generation: dropped */
        fi;
        m = 0; x = 0; r = 0; ci = 0; oi = 0; v = 0; q = 0; ahead = 0
       }
    od
}

/* Deadlock check: when nothing can move and no rank has a packet in flight (no timer can
 * fire), every rank must have finished. A rank waiting forever for a join or a recovery
 * that nobody else will take part in is caught here. */
#define IDLE_ALL (busy[0] + busy[1] + busy[2 % NB] + busy[3 % NB] + busy[4 % NB] + busy[5 % NB] == 0)
proctype Quiet()
{
end:
    do
    :: atomic { timeout && IDLE_ALL && !(ndone == W) -> assert(false) }
    od
}

init
{
    byte w, s, q;
    atomic {
        q = 0;
        do
        :: q < 2 * S ->
            crnd[q] = q % 2;
            ccnt[q] = W;
            cseen[q] = ALLW;
            crnd[2 * S + q] = q % 2;
            ccnt[2 * S + q] = W;
            cseen[2 * S + q] = ALLW;
            q++
        :: else -> break
        od;
        jbits = ALLW;
        w = 0;
        do
        :: w < W ->
            s = 0;
            do
            :: s < S -> run Port(w, s); s++
            :: else -> break
            od;
            run Rank(w);
            w++
        :: else -> break
        od;
        run Quiet()
    }
}
