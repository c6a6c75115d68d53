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
