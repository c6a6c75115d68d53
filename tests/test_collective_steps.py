"""The step-through of a collective (explorer/teaching/collective_steps.py): after the last step,
every link has carried what the algorithm's closed form says; each rank sends what the alpha-beta
papers count; step times are alpha + bytes / beta of the slowest link."""
from __future__ import annotations

import pytest

from explorer.teaching.collective_steps import SWITCH, Links, step_seconds, walkthrough

S = 64e6


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_ring_all_reduce_puts_2_n_minus_1_over_n_S_on_every_link(n):
    """Patarasuk & Yuan 2009: 2(n-1) steps of S/n; each ring link carries 2(n-1)/n x S."""
    w = walkthrough("ring", "all-reduce", n, S)
    assert len(w.steps) == 2 * (n - 1)
    assert w.link_bytes() == {(i, (i + 1) % n): pytest.approx(2 * (n - 1) / n * S) for i in range(n)}


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather"])
def test_ring_halves_carry_n_minus_1_over_n_S(op):
    w = walkthrough("ring", op, 8, S)
    assert len(w.steps) == 7
    assert all(v == pytest.approx(7 / 8 * S) for v in w.link_bytes().values()) and len(w.link_bytes()) == 8


def test_ring_reduce_scatter_ends_with_each_rank_owning_one_chunk():
    """After step k, rank i has received chunk (i-1-k) mod n; after n-1 steps every chunk has
    visited every rank once, so each rank holds one fully reduced chunk, all different."""
    n = 5
    w = walkthrough("ring", "reduce-scatter", n, S)
    last = {t.dst: t.chunk for t in w.steps[-1].transfers}
    assert sorted(last.values()) == sorted(f"chunk {c}" for c in range(n))


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_halving_doubling_sends_2_n_minus_1_over_n_S_per_rank(n):
    """Thakur et al. 2005, Sec. 4: log2 n halving steps and log2 n doubling steps; each rank sends
    S/2 + S/4 + ... + S/n twice."""
    w = walkthrough("halving-doubling", "all-reduce", n, S)
    assert len(w.steps) == 2 * (n.bit_length() - 1)
    assert all(w.sent_by(r) == pytest.approx(2 * (n - 1) / n * S) for r in range(n))
    # The nearest partner (distance 1) exchanges the smallest blocks, S/n each way per half.
    assert w.link_bytes()[(0, 1)] == pytest.approx(2 * S / n)


@pytest.mark.parametrize("n", [3, 7, 8, 15])
def test_tree_moves_S_up_and_down_every_edge(n):
    w = walkthrough("tree", "all-reduce", n, S)
    edges = {(i, (i - 1) // 2) for i in range(1, n)}
    expected = {**{e: S for e in edges}, **{(b, a): S for a, b in edges}}
    assert w.link_bytes() == {k: pytest.approx(v) for k, v in expected.items()}
    depth = max((i + 1).bit_length() - 1 for i in range(n))
    assert len(w.steps) == 2 * depth


def test_hierarchical_crosses_nodes_with_2_k_minus_1_over_k_of_a_slice():
    """16 ranks, 4 per node (k = 4 nodes): inside a node each ring link carries 2(g-1)/g x S;
    across, each rank's link to its counterpart carries 2(k-1)/k x S/g."""
    n, g, k = 16, 4, 4
    w = walkthrough("hierarchical", "all-reduce", n, S, g)
    lb = w.link_bytes()
    inside = lb[(0, 1)]
    across = lb[(0, 4)]
    assert inside == pytest.approx(2 * (g - 1) / g * S)
    assert across == pytest.approx(2 * (k - 1) / k * S / g)
    assert all(w.crosses_nodes(t) == (t.src // g != t.dst // g) for st in w.steps for t in st.transfers)


def test_nvls_sends_S_into_the_switch_and_back():
    w = walkthrough("nvls", "all-reduce", 8, S)
    assert len(w.steps) == 2
    assert w.link_bytes() == {**{(i, SWITCH): S for i in range(8)}, **{(SWITCH, i): S for i in range(8)}}


@pytest.mark.parametrize("n", [2, 4, 8])
def test_pairwise_all_to_all_gives_each_pair_S_over_n(n):
    w = walkthrough("pairwise", "all-to-all", n, S)
    assert len(w.steps) == n - 1
    assert w.link_bytes() == {(i, j): pytest.approx(S / n) for i in range(n) for j in range(n) if i != j}


def test_step_times_are_alpha_plus_bytes_over_beta_of_the_slowest_link():
    """8 ranks in 2 nodes of 4, ring: the steps whose ring crosses a node take the NIC's alpha and
    beta (every ring step has two crossing links); 2(n-1) such steps."""
    links = Links(alpha_in=3e-6, beta_in=300e9, alpha_out=10e-6, beta_out=25e9)
    w = walkthrough("ring", "all-reduce", 8, S, 4)
    times = step_seconds(w, links)
    assert all(t == pytest.approx((10e-6, S / 8, 10e-6 + S / 8 / 25e9, True)) for t in times)
    one_node = step_seconds(walkthrough("ring", "all-reduce", 8, S, 8), links)
    assert all(t[2] == pytest.approx(3e-6 + S / 8 / 300e9) and not t[3] for t in one_node)


@pytest.mark.parametrize("args, word", [
    (("ring", "all-to-all", 4), "runs"), (("ring", "all-reduce", 17), "ranks"),
    (("halving-doubling", "all-reduce", 6), "power of two"), (("spiral", "all-reduce", 4), "algorithm"),
])
def test_what_cannot_be_drawn_says_why(args, word):
    with pytest.raises(ValueError) as info:
        walkthrough(*args, S)
    assert word in str(info.value)
