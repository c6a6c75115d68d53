"""Which field an error names when several rules fail: the one whose value the user must change."""
from __future__ import annotations

from explorer.cli import main


def test_a_cp_that_does_not_divide_the_sequence_is_cps_error(capsys):
    """A hunt: cp 3 at 131,072 tokens was reported against parallelism.token_slices ("use a divisor of
    43690", which no value of it fixes): the token-slice rule ran before the cp rule."""
    code = main(["validate", "long-context-cp", "--set", "parallelism.cp=3", "--set", "parallelism.dp=8",
                 "--set", "cluster.nodes=3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: parallelism.cp: 3 needs seq_len=131072 divisible by 2*cp")
    assert "\n" not in err


def test_a_split_with_empty_end_chunks_points_to_pipeline_layout(capsys):
    """A hunt: run reports dualpipe-v's split on deepseek-v3 as stage_layers [0, 2, ..., 3, 0] (the
    embedding and the loss on chunks of their own); fed back through stage_layers it was refused
    with no way named.  The error names pipeline_layout, which takes it, and only for end chunks."""
    assert main(["run", "teaching-8gpu", "--set", "parallelism.stage_layers=[0,12,12,0]"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("every pipeline chunk needs at least one layer; a split whose first or last chunk "
                        "holds only the embedding or the loss is given as parallelism.pipeline_layout")
    assert main(["run", "teaching-8gpu", "--set", "parallelism.pipeline_layout=[0,12,12,0]"]) == 0
    capsys.readouterr()
    assert main(["run", "teaching-8gpu", "--set", "parallelism.stage_layers=[6,0,12,6]"]) == 2
    assert capsys.readouterr().err.strip().endswith("every pipeline chunk needs at least one layer")
