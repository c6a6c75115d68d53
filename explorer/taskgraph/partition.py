"""Layer partitioning: which contiguous layers each pipeline chunk holds.

Megatron-LM splits layers uniformly over the pipeline (Narayanan et al. SC21 Sec. 2.2); real
models are not uniform — the first stage also embeds, the last computes the output layer and the
loss, MoE models mix dense and expert layers — so the split here balances the cost of each chunk
(the given ``parallelism.stage_layers`` win when set).
"""
from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate


def split_layers(costs: list[float], chunks: int, first_extra: float, last_extra: float,
                 stages: int | None = None) -> tuple[int, ...]:
    """Contiguous split of layers into ``chunks`` chunks (>= 1 layer each).

    The first chunk also carries ``first_extra`` (embedding), the last ``last_extra`` (output layer
    and loss).  With one chunk per stage (``stages`` None or equal to ``chunks``) the split
    minimises the largest chunk cost; among optimal splits the one closest to evenly spaced
    cumulative cost is kept, so slack goes to the chunks with the edge work (Llama 3 405B puts 126
    layers on 16 stages as 7, 8 x 14, 7 for this reason).

    Interleaved schedules (``stages`` < ``chunks``; chunk k runs on stage k mod stages, Narayanan et
    al. SC21 Sec. 2.2) are paced round by round (virtual stage r = chunks r*p .. r*p+p-1) and by
    the busiest *stage*, the sum of its chunks, so a split that only balances chunks can leave
    both unbalanced (24 layers in 12 chunks as 3 x 6, 1 x 6 puts 7 layers on stage 0 and 3-layer
    chunks in the first rounds).  Candidates are then compared by the sum over rounds of the
    round's largest chunk, then the largest stage total, then the largest chunk, then their order
    (a candidate whose largest chunk exceeds the first one's is not taken):
    the min-max-chunk split above, Megatron-LM's uniform split (the same number of layers per
    virtual stage) with the remainder spread where it costs least, and the uniform split with one
    layer less on a chunk whose embedding or output-layer work is heavy (>= half a layer).

    Costs: prefix sums and bisection, O(chunks log n) per probe of the 60-step bisection on the cap.

    >>> split_layers([1.0] * 24, 12, 0.0, 0.5, stages=4)
    (2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2)
    """
    n = len(costs)
    extras = [0.0] * chunks
    extras[0] += first_extra
    extras[-1] += last_extra
    prefix = [0.0, *accumulate(costs)]

    def greedy(cap: float) -> list[int] | None:
        # Each chunk takes as many layers as fit under ``cap`` (at least one, leaving one for every
        # later chunk); feasible when the last chunk, which takes the rest, fits too.
        out: list[int] = []
        i, tol = 0, cap * (1 + 1e-9)
        for j in range(chunks - 1):
            end = bisect_right(prefix, prefix[i] + tol - extras[j], lo=i) - 1
            # Settle the rounding of the bisection target on the chunk's own sum.
            while end < n and prefix[end + 1] - prefix[i] + extras[j] <= tol:
                end += 1
            while end > i and prefix[end] - prefix[i] + extras[j] > tol:
                end -= 1
            end = max(min(end, n - (chunks - j - 1)), i + 1)
            out.append(end - i)
            i = end
        out.append(n - i)
        return out if prefix[n] - prefix[i] + extras[-1] <= tol else None

    def chunk_costs(counts: list[int] | tuple[int, ...]) -> list[float]:
        ends = list(accumulate(counts))
        return [extras[k] + prefix[e] - prefix[e - c] for k, (c, e) in enumerate(zip(counts, ends))]

    lo, hi = max(max(costs), max(extras)), (prefix[n] + sum(extras)) * (1 + 1e-6)
    for _ in range(60):
        mid = (lo + hi) / 2
        if greedy(mid) is None:
            lo = mid
        else:
            hi = mid
    # hi is the optimal cap up to rounding noise; one more tolerance step makes every chunk whose
    # cost equals the optimum fit for certain, so the greedy packs the front chunks full.
    best = greedy(hi * (1 + 1e-9))
    assert best is not None
    # Evenly spaced alternative: assign each layer by the midpoint of its cumulative cost.
    total = prefix[n] + sum(extras)
    counts = [0] * chunks
    acc = extras[0]                      # summed layer by layer: exact ties decide as before
    for c in costs:
        counts[min(int((acc + c / 2) / (total / chunks)), chunks - 1)] += 1
        acc += c
    if min(counts) >= 1 and max(chunk_costs(counts)) <= max(chunk_costs(best)) * (1 + 1e-9):
        best = counts
    if stages is None or stages >= chunks:
        return tuple(best)

    def score(counts: list[int] | tuple[int, ...]) -> tuple[float, float, float]:
        # (sum over virtual-stage rounds of the round's slowest chunk, largest stage total,
        # largest chunk).  Interleaved 1F1B passes every micro-batch through the rounds in order,
        # each at the pace of its slowest chunk, so the rounds' maxima add up (SC21 Sec. 2.2.2:
        # the bubble is (p-1) chunk times); the stage totals pace the steady state.
        cc = chunk_costs(counts)
        per = [0.0] * stages
        for k, c in enumerate(cc):
            per[k % stages] += c
        rounds = sum(max(cc[r:r + stages]) for r in range(0, chunks, stages))
        return rounds, max(per), max(cc)

    def better(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        # Lexicographic with a relative tolerance: summation-order noise never decides.
        for x, y in zip(a, b):
            if x < y * (1 - 1e-9):
                return True
            if x > y * (1 + 1e-9):
                return False
        return False

    def spread(base: list[int], spare: int) -> list[int] | None:
        # Hand out ``spare`` layers one at a time to the chunk where they cost least (score; ties:
        # the lower index), each chunk at most one.
        if min(base) < 1 or spare > chunks:
            return None
        out = list(base)
        free = list(range(chunks))
        for _ in range(spare):
            pick = None
            for k in free:
                trial = out[:k] + [out[k] + 1] + out[k + 1:]
                if pick is None or better(score(trial), pick[0]):
                    pick = (score(trial), k)
            out[pick[1]] += 1
            free.remove(pick[1])
        return out

    base, rem = divmod(n, chunks)
    candidates = [list(best), spread([base] * chunks, rem)]
    mean = prefix[n] / n
    if base > 1 and max(first_extra, last_extra) >= mean / 2:
        # One layer less on the chunk(s) whose edge work is heavy (at least half a layer).
        lighter = [base] * chunks
        spare = rem
        for k, e in ((0, first_extra), (chunks - 1, last_extra)):
            if e >= mean / 2:
                lighter[k] -= 1
                spare += 1
        candidates.append(spread(lighter, spare))
    # A candidate may not enlarge the largest chunk: it sets the warm-up and cool-down, (p-1) chunk
    # times (SC21 Sec. 2.2.2), which the round sum only approximates.
    keep = candidates[0]
    cap = max(chunk_costs(keep)) * (1 + 1e-9)
    for cand in candidates[1:]:
        if cand is not None and max(chunk_costs(cand)) <= cap and better(score(cand), score(keep)):
            keep = cand
    return tuple(keep)


def choose_split(given: tuple[int, ...] | None, layer_costs: list[float], chunks: int, stages: int | None,
                 first_extra: float, last_extra: float) -> tuple[int, ...]:
    """Layers per chunk: ``given`` (``parallelism.stage_layers``) when set, else the balanced
    :func:`split_layers` of the layers' training costs with the embedding on the first chunk and
    the output layer on the last.  ``stages`` None: chunks are balanced one by one (DualPipe, whose
    ranks hold a chunk from each end)."""
    if given is not None:
        return tuple(given)
    return split_layers(layer_costs, chunks, first_extra, last_extra, stages=stages)
