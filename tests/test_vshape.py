"""The V-shaped schedules (explorer/schedules/vshape.py, dualpipe_v.py; issue 35 item 3): their
placement (rank r holds stages r and 2p-1-r, the turn on rank p-1 local), the unit-time grids of
the references, the activation memory relative to 1F1B that the papers state, and the simulation
they give: the estimator's and the fold's equal to the full simulation."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_estimator import assert_agrees
from test_fold import as_json
from test_golden import same
from test_unit_time import _tags

from explorer.estimate import estimate_many
from explorer.fold import budget
from explorer.scenario import ScenarioError, from_dict
from explorer.schedules import dualpipe, dualpipe_v, pipeline, registry, vshape
from explorer.simulate import simulate
from explorer.taskgraph.layout import layout_for
from explorer.taskgraph.make import iteration_builder
from explorer.teaching.bubble import explain_bubble
from explorer.teaching.schedule_story import narrate
from explorer.teaching.unit_time import as_rows, makespan, textbook_micro_batches, unit_grid

V_SCHEDULES = ("zb-v", "v-half", "v-min", "dualpipe-v")

BASE = {
    "model": {"layers": 16, "hidden": 2048, "heads": 16, "vocab": 51200, "seq_len": 1024},
    "training": {"global_batch": 32, "micro_batch": 1},
    "hardware": {"gpu": "a100-80gb"},
    "cluster": {"nodes": 4, "gpus_per_node": 8},
    "parallelism": {"tp": 8, "pp": 4},
}


def scenario(schedule: str, **par) -> dict:
    raw = json.loads(json.dumps(BASE))
    raw["parallelism"].update(schedule=schedule, **par)
    return raw


def test_v_placement_is_a_registry_property_read_by_the_layout():
    """Rank r holds positions r and 2p-1-r (Qi et al. 2024 Sec. 3): 2p chunks on p ranks, the
    first and last on rank 0, the turn from position p-1 to p on rank p-1."""
    for name in V_SCHEDULES:
        sch = registry.get(name)
        assert sch.placement is registry.Placement.V and sch.chunks_per_rank(1) == 2
        lay = layout_for(sch, 4, 1)
        assert lay.length == 8 and lay.ends_on_one_rank
        assert [lay.at(0, q) for q in range(8)] == [(0, 0), (1, 0), (2, 0), (3, 0),
                                                    (3, 1), (2, 1), (1, 1), (0, 1)]
        assert [lay.chunk_index(3, c) for c in (0, 1)] == [3, 4]
    assert registry.get("interleaved").placement is registry.Placement.INTERLEAVED
    assert layout_for(registry.get("interleaved"), 4, 2).at(0, 4) == (0, 1)     # chunk c of rank r = c*p + r


def test_the_turn_is_a_local_hand_off_without_a_transfer():
    """Per micro-batch 2p-1 hops each way along the V, of which the turn on rank p-1 sends nothing:
    m(2p-2) forward and m(2p-2) backward transfers (1F1B: m(p-1) each)."""
    sc = from_dict(scenario("zb-v"))
    g = iteration_builder(sc).build()
    pp = [t for t in g.tasks if t.kind == "pp"]
    m, p = sc.micro_batches, 4
    assert len(pp) == m * (2 * p - 2) * 2
    assert not any(t.info.pair == p - 1 for t in pp)        # no wrap-around pair: only r <-> r+1 links
    one = iteration_builder(from_dict(scenario("1f1b"))).build()
    assert sum(t.kind == "pp" for t in one.tasks) == m * (p - 1) * 2
    assert budget.estimate(sc).tasks == len(g.tasks)          # the work budget counts them exactly


def test_zb_v_is_the_reference_handcrafted_schedule():
    """sail-sg/zero-bubble-pipeline-parallelism, handcrafted ZB-V (get_zb_v_schedule(4, 8)): rank r
    starts r units late and then never idles — 2(p-r)-1 forwards of chunk 0, r pairs (F1, F0),
    p-r triples (F1, B1, W1), the steady (F0, B0, W0, F1, B1, W1), a cool-down.  Its makespan is
    6m + p - 1 at F = B = W: no bubble but the diagonal start (paper Table 1: V-ZB about 0)."""
    cells = unit_grid("zb-v", 4, 8)
    rows = as_rows(cells, 4)
    assert rows == [
        "123456711*22*33*44*81*55*2*66*3*77*4*88*5*6*7*8*...",
        ".123451621*32*43*71*54*82*65*3*76*4*87*586*7*8***..",
        "..123142531*42*61*53*72*64*83*75*4*86*57687*8*****.",
        "...112233441*51*52*62*63*73*74*84*85*5667788*******",
    ]
    assert _tags(cells, 4, "chunk")[0] == "000000011*11*11*11*00*11*0*11*0*11*0*11*0*0*0*0*..."
    for r, row in enumerate(rows):                          # the reference's rows: contiguous from r
        assert row[:r] == "." * r and "." not in row[r:r + 48]
    for p, m in ((2, 6), (4, 12), (8, 16)):
        want = vshape.ideal_makespan("zb-v", p, m, 1, 1, 1)
        assert makespan(unit_grid("zb-v", p, m)) == 6 * m + p - 1 == want


def test_dualpipe_v_is_the_readme_figure():
    """deepseek-ai/DualPipe README, DualPipeV on 4 ranks (8 stages), 10 micro-batches: rank 0 runs
    7 forwards of chunk 0, F1 0, three (B1, W, F1) triples, then the fused pairs; an F&B is three
    units (F + full B).  Each rank matches the figure's cells; the figure draws step 5's idle unit
    before the full B1 where the grid, starting each op as early as it can, draws it after (same
    makespan)."""
    cells = unit_grid("dualpipe-v", 4, 10)
    assert as_rows(cells, 4) == [
        "123456711*22*33*4###...###############77.###88.###99.###aa7*8*9*a*",
        ".123451621*32*4###..#####################77.###88.###9977.a8*9*a**",
        "..123142531*4###.###########################77.###8877.998.a9*a***",
        "...11223344511#################################7777.8888.99.aa****",
    ]
    assert makespan(cells) == dualpipe_v.ideal_makespan(4, 10, 1, 1, 1) == 66
    # The fused pair around F0 7 (0-based) on rank 0: the figure's "7 | 3", F of chunk 0 with B1 3.
    fb = next(c for c in cells if c.rank == 0 and c.kind == "F&B")
    assert (fb.chunk, fb.mb, fb.b_mb) == (0, 7, 3)


def test_v_half_and_v_min_are_the_building_blocks_repeated_squeezed_and_reordered():
    """Qi et al. 2024 Sec. 3.1: V-Shape blocks with uniform offsets 2 (V-Half) and 1 (V-Min),
    repeated every 6 passes, squeezed and reordered as the authors' implementation does it
    (zbv_greedy.py; its orders pass by pass in tests/test_vshape_paper.py).  Steady state: every
    rank runs its 6 passes per 6 units."""
    assert as_rows(unit_grid("v-half", 4, 8), 4) == [
        "12345..11*22*3..13*4*624*5*735*6*846*77*5**886*7**.8*",
        ".1234.1.21*32*.1*543*2*654*3*765*48*76*57*8*687***8*.",
        "..1231.2.31*421**45.23*5*634*6*745*7*856*876*78**8***",
        "...112233..1*1*442*2*553*3*664*47*755*8*86677**88****",
    ]
    assert as_rows(unit_grid("v-min", 4, 8), 4) == [
        "123....11*22*..1*4.332**5443**6554**7665**8776**.887**...8*",
        ".12...1.21*3..12**3423**4534**5645**6756**7867**8.78**..8*.",
        "..12.1.2..1*31*.23*24*34*35*45*46*56*57*67*68*78*7*.8*.8*..",
        "...1122....11**3322**4433**5544**6655**7766**8877**..88**..",
    ]
    # F0, F1, B1, B0 of rank 0 at offset 2: F0 at 0, the turn on rank 3 after 2*3 + 1, the climb
    # back 3 more; on even p a gap of 3 before the loss (else two passes of some rank would share a
    # slot of the period), B0 2 after B1 on rank 3 (2*3 later than on rank 0), then the climb (3).
    assert vshape.building_block(4, 2)[0] == (0, 10, 14, 25)
    for k in (1, 2):        # balanced: every rank's two lifespans (F to B) sum to the same
        spans = {(b0 - f0) + (b1 - f1) for f0, f1, b1, b0 in vshape.building_block(8, k)}
        assert spans == {(4 * 8 if k == 1 else 6 * 8 + 6 - 1)}


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 8, 12, 16])
def test_activation_memory_relative_to_1f1b_follows_the_papers(p):
    """Peak activations in micro-batches of a whole stage (a V chunk is half a stage): 1F1B p;
    ZB-V p (paper Table 1, V-ZB); V-Min (p+4)//3 and V-Half (p+2)//2 (the paper's companion table:
    about 1/3 and 1/2 of 1F1B); DualPipeV PP+1 chunks with PP = 2p stages (DualPipe README)."""
    m = 4 * p
    half = [0.5, 0.5]

    def peak(order_of, peaks=pipeline.peak_activations) -> float:
        return max(peaks(order_of(r, p, m), half) for r in range(p))

    one_f_one_b = max(pipeline.peak_activations(pipeline.one_f_one_b(r, p, m), [1.0]) for r in range(p))
    assert one_f_one_b == p
    assert peak(vshape.zb_v) == p == vshape.PAPER_PEAK["zb-v"](p)
    assert peak(vshape.v_min) == (p + 4) // 3 == vshape.PAPER_PEAK["v-min"](p)
    assert peak(vshape.v_half) == (p + 2) // 2 == vshape.PAPER_PEAK["v-half"](p)
    assert peak(dualpipe_v.dualpipe_v, dualpipe.peak_activations) == (2 * p + 1) / 2
    assert max(registry.get("v-min").in_flight(r, p, m, 1) for r in range(p)) == 2 * ((p + 4) // 3)


def test_dualpipe_v_holds_one_copy_of_each_stage_where_dualpipe_holds_two():
    """DualPipe README table: DualPipe 2x parameters per device, DualPipeV one copy of each of its
    2p stages (2 half-size chunks per rank)."""
    dp = iteration_builder(from_dict(scenario("dualpipe"))).chunks
    dv = iteration_builder(from_dict(scenario("dualpipe-v"))).chunks
    assert len(dp) == 4 and len(dv) == 8
    total = sum(c.params for c in dv)
    assert sum(c.params for c in dp) == pytest.approx(total, rel=1e-12)
    # Rank r holds DualPipe's chunks r and p-1-r, so ranks r and p-1-r hold the same two: the 4
    # ranks hold every parameter twice.  DualPipeV's rank r holds chunks r and 2p-1-r, disjoint
    # from every other rank's: once.  (Per rank the split's layers may differ by one: 16 layers
    # over 4 ranks with the embedding and loss on rank 0 put 5 on one of the others.)
    p = 4
    held_dp = sum(dp[r].params + dp[p - 1 - r].params for r in range(p))
    held_dv = sum(dv[r].params + dv[2 * p - 1 - r].params for r in range(p))
    assert held_dp == pytest.approx(2 * total, rel=1e-12)
    assert held_dv == pytest.approx(total, rel=1e-12)


@pytest.mark.parametrize("p, m", [(4, 32), (8, 64), (16, 128)])
def test_bubbles_at_unit_cost_follow_the_papers(p, m):
    """At F = B = W, with B = (p-1)/(m+p-1) 1F1B's bubble share (the repository README's table):
    ZB-V about 0 (only its p-1 units of diagonal start against 6m, Qi et al. Table 1); V-Half B/2
    and V-Min 2B/3 read as idle time against 1F1B's 6(p-1) units: each just under (by at most 4
    units, tests/test_vshape_paper.py has the exact counts); DualPipeV between ZB-V and V-Min (below
    V-Half from p = 8 on; at p = 4 V-Half's 5 idle units beat DualPipeV's 6)."""
    shares = {s: 1 - 6 * m / makespan(unit_grid(s, p, m)) for s in V_SCHEDULES}
    one = (p - 1) / (m + p - 1)
    assert shares["zb-v"] == pytest.approx((p - 1) / (6 * m + p - 1))
    for s in ("v-half", "v-min"):
        idle = makespan(unit_grid(s, p, m)) - 6 * m
        claim = vshape.PAPER_BUBBLE_OF_1F1B[s] * 6 * (p - 1)
        assert claim - 4 <= idle < claim
    assert shares["zb-v"] < shares["v-half"] < shares["v-min"] < one
    assert shares["zb-v"] < shares["dualpipe-v"] < shares["v-min"]
    assert (shares["dualpipe-v"] < shares["v-half"]) is (p >= 8)


def test_the_v_split_balances_ranks_and_puts_the_larger_half_second():
    """A V rank holds chunks r and 2p-1-r: the split balances the ranks' pairs (rank 0's runs the
    embedding and the output layer besides) and gives a pair's larger half to its second chunk, of
    which the rank holds fewer micro-batches at its peak (ZB-V's rank 0: 2p-1 of chunk 0, 1 of
    chunk 1) — 32 layers on 8 ranks: rank 0 three, one rank five, the others four."""
    raw = scenario("zb-v", pp=8, tp=4)
    raw["model"]["layers"] = 32
    b = iteration_builder(from_dict(raw))
    pairs = [(b.layer_counts[r], b.layer_counts[15 - r]) for r in range(8)]
    assert all(a <= c for a, c in pairs)
    assert sorted(a + c for a, c in pairs) == [3, 4, 4, 4, 4, 4, 4, 5]
    assert pairs[0][0] + pairs[0][1] == 3
    live = [0, 0]
    peak = (0, 0)
    for op in vshape.zb_v(0, 8, 16):
        live[op.chunk] += {"F": 1, "W": -1}.get(op.kind, 0)
        peak = max(peak, tuple(live), key=sum)
    assert peak == (15, 1)


def test_validation_names_the_field_and_what_is_valid():
    with pytest.raises(ScenarioError) as e:
        from_dict(scenario("dualpipe-v", vpp=2))
    assert e.value.field == "parallelism.vpp"
    raw = scenario("dualpipe-v")
    raw["training"]["global_batch"] = 6
    with pytest.raises(ScenarioError) as e:
        from_dict(raw)
    assert e.value.field == "training.global_batch" and "at least 2*pp = 8" in str(e.value)
    from_dict(scenario("zb-v"))                                  # any m, any pp
    raw = scenario("zb-v")
    raw["model"]["layers"] = 5                                   # 2p = 8 chunks, 2 may hold an end alone
    with pytest.raises(ScenarioError) as e:
        from_dict(raw)
    assert e.value.field == "model.layers" and "2*pp = 2*4" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        from_dict(scenario("v-half", stage_layers=[4, 4, 4, 4]))
    assert e.value.field == "parallelism.stage_layers" and "need 2*pp = 8" in str(e.value)
    from_dict(scenario("v-half", stage_layers=[1, 2, 2, 3, 3, 2, 2, 1]))
    raw = scenario("v-min", pp=3)
    raw["cluster"]["nodes"] = 3
    raw["training"]["global_batch"] = 5
    from_dict(raw)


def test_teaching_draws_and_narrates_them():
    for s in V_SCHEDULES:
        drawn = textbook_micro_batches(s, 8, 64)
        assert drawn >= (16 if s == "dualpipe-v" else 1) and makespan(unit_grid(s, 8, drawn)) > 0
    cells = unit_grid("zb-v", 4, 8)
    assert narrate(cells, 4, 3, 0) == ("idle (bubble): its forward of micro-batch 1 waits for rank 2's "
                                       "activations of micro-batch 1 (there at unit 3)")
    assert "micro-batch" in narrate(unit_grid("dualpipe-v", 4, 10), 4, 0, 17)
    # The V's turn: rank 3's chunk 1 (stage 4) hands its gradient to its own chunk 0 (stage 3),
    # which sends it up to rank 2; chunk 1 of rank 2 (stage 5) sends down to rank 3.
    assert narrate(cells, 4, 3, 11) == ("steady state: input gradient of micro-batch 1, handed to its own "
                                        "first chunk at once (the V's turn); its weight gradient waits")
    assert "sent on to rank 2" in narrate(cells, 4, 3, 14) and "sent on to rank 3" in narrate(cells, 4, 2, 10)
    assert narrate(cells, 4, 3, 8).endswith("micro-batch 3 (stage 4 of the V's 8)")
    r = simulate(from_dict(scenario("zb-v")))
    assert "the logits on stage 0 (its last chunk)" in explain_bubble(r)


def test_the_estimator_equals_the_simulation():
    """Rows of every V schedule, tied embeddings (both ends on rank 0), ZeRO-1, and DeepSpeed's
    blocking sends (the split weighs each chunk's sends: none at the turn)."""
    raws = []
    for s in V_SCHEDULES:
        for gb, tied, framework in ((16, False, "megatron"), (24, True, "megatron"),
                                    (16, False, "deepspeed")):
            raw = scenario(s, tp=4, dp=2, zero=1)
            raw["training"].update(global_batch=gb, framework=framework)
            raw["model"]["tied_embeddings"] = tied
            raws.append(raw)
    p3 = scenario("zb-v", tp=4, dp=2)                           # P3 priorities: a flushing V accepts them
    p3["communication"] = {"dp_priority": True, "dp_overlap": True}
    raws.append(p3)
    scs = [from_dict(r) for r in raws]
    assert max(assert_agrees(scs, estimate_many(scs))) <= 1e-9


@settings(max_examples=6, deadline=None)
@given(st.sampled_from(V_SCHEDULES), st.sampled_from([2, 4]), st.integers(2, 12), st.sampled_from([0, 1]))
def test_folded_equals_the_full_simulation(schedule, pp, per_stage, zero):
    """Folded where the fold takes them (V-Half and V-Min repeat one period; ZB-V's reference order
    and DualPipeV's phases may not), else in full: equal to the unfolded simulation to 1e-9."""
    raw = scenario(schedule, pp=pp, zero=zero, dp=4 // pp)
    raw["training"]["global_batch"] = 4 // pp * pp * per_stage
    sc = from_dict(raw)
    folded, full = simulate(sc), simulate(sc, fold=False)
    assert same(as_json(full), as_json(folded), abs_tol=1e-9 * full.iteration_time_s) == []


def test_v_min_takes_a_fast_route_and_equals_the_full_simulation():
    """V-Min's order is periodic: its 128 micro-batches run over arrays (one array row: a fold's
    four reduced runs would cost as much, explorer/fold/cost.py) or fold over tasks, never every
    task on the engine, and equal the full simulation."""
    from explorer.fold.run import FULL, routed
    raw = scenario("v-min")
    raw["training"]["global_batch"] = 128
    sc = from_dict(raw)
    assert routed(sc)[1].taken != FULL
    folded, full = simulate(sc), simulate(sc, fold=False)
    assert same(as_json(full), as_json(folded)) == []


def test_the_design_search_explores_them():
    """The search enumerates the registry's synchronous schedules: each V schedule at vpp 1, where
    its 2p chunks can hold the layers (2·pp - 2 <= layers)."""
    from explorer.design.space import enumerate_layouts
    raw = scenario("1f1b", pp=2, tp=1, dp=16)
    raw["model"]["layers"] = 6
    got = {(lay.schedule, lay.pp) for lay in enumerate_layouts(from_dict(raw))}
    for s in V_SCHEDULES:
        assert (s, 2) in got and (s, 4) in got and (s, 8) not in got      # 2*8 - 2 = 14 > 6 layers
    assert ("1f1b", 4) in got



def test_heavy_ends_leave_rank_0_of_a_v_without_its_floor_of_layers():
    """DeepSeek-V3 as DualPipeV: rank 0 runs the embedding and, on its last chunk, the output
    layer and the MTP module. Its first chunk holds no layer (an embedding-only chunk, as
    one-direction splits allow) instead of the floor of two layers a DualPipe pair keeps, and the
    layers weigh their F&B seconds one by one (the first three are dense): the slowest rank's
    seconds fall, and the iteration with them (21.45 s with the floor, measured when found)."""
    from explorer.config import shipped_scenarios
    from explorer.scenario import load
    from explorer.taskgraph.dualpipe_split import _paired
    from explorer.taskgraph.split_cost import fused_seconds, split_costs
    from explorer.taskgraph.v_split import rank_seconds
    sc = load(shipped_scenarios()["deepseek-v3"], {"parallelism.schedule": "dualpipe-v"})
    b = iteration_builder(sc)
    c = split_costs(b.sc, b.net, b.cm, b.spec, b.tied)
    per = fused_seconds(c.layers, c.layers, c.sm).tolist()
    first, last = (float(fused_seconds(x, x, c.sm)) for x in (c.first, c.last))
    assert b.layer_counts[0] == 0 and sum(b.layer_counts) == sc.model.layers
    floor2 = _paired(per, first, last, len(b.layer_counts))
    assert max(rank_seconds(b.layer_counts, per, first + last)) < max(rank_seconds(floor2, per, first + last))
    assert simulate(sc).iteration_time_s < 18.0          # 21.45 s with the floor, 19.27 s by the mean


def _compositions(n: int, k: int):
    """Every split of n layers into k chunks."""
    if k == 1:
        yield (n,)
        return
    for first in range(n + 1):
        yield from ((first, *rest) for rest in _compositions(n - first, k - 1))


@pytest.mark.parametrize("per,ends,optimal", [([1.0] * 8, 0.0, True), ([2.0, 2.0] + [1.0] * 6, 6.0, True),
                                              ([1.0] * 3 + [3.0] * 5, 4.0, False),
                                              ([1.0] * 2 + [4.0] * 10, 9.0, False)])
def test_the_v_descent_never_slows_its_start_and_can_stop_short_of_the_optimum(per, ends, optimal):
    """Layers of unequal cost (dense first layers, then MoE ones) and heavy ends on 2 V ranks
    (4 chunks), against an exhaustive search over every split: the descent from the proportional
    start never ends slower than it began and keeps inner chunks non-empty; it reaches the least
    slowest rank on the first two, and stops one layer's move short on the last two (it moves one
    layer from the slowest rank at a time: a local optimum, what v_split.py says it is)."""
    from explorer.taskgraph.dualpipe_split import _paired
    from explorer.taskgraph.v_split import _descend, rank_seconds
    start = _paired(per, 0.0, ends, 4, edge_floor=0.0)
    got = _descend(start, per, ends)
    best = min(max(rank_seconds(cs, per, ends)) for cs in _compositions(len(per), 4)
               if all(x >= 1 for x in cs[1:-1]))
    assert sum(got) == len(per) and all(x >= 1 for x in got[1:-1])
    assert max(rank_seconds(got, per, ends)) <= max(rank_seconds(start, per, ends))
    assert (max(rank_seconds(got, per, ends)) == pytest.approx(best)) is optimal
