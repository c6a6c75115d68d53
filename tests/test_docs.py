"""The README and docs/*.md stay true to the code: every scenario field is documented with the
schema's defaults and bounds, the README names the commands CI runs, every relative link, anchor
and quoted path resolves, and the README's layout map names exactly the packages and top-level
modules of explorer/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer.scenario import SETTABLE

from conftest import ROOT

README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "scenario-reference.md"


def _pages() -> list[Path]:
    """The README and every page of docs/."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks (a ``# comment`` in a bash block is no heading)."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.M | re.S)


def test_scenario_reference_lists_every_scenario_field():
    reference = REFERENCE.read_text(encoding="utf-8")
    missing = [k for k, f in SETTABLE.items() if not f.metadata.get("derived") and f"`{k}`" not in reference]
    assert missing == []


def test_scenario_reference_field_table_is_the_schema():
    """Defaults, valid ranges (physical bounds) and meanings in the reference come from the schema."""
    from explorer.config.docs import field_table
    assert field_table() in REFERENCE.read_text(encoding="utf-8"), \
        "docs/scenario-reference.md's field table is stale: paste the output of python -m explorer.docs"


def test_ci_runs_the_readme_test_command():
    """The pytest command of .ci/run is quoted, whole, in the README."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for line in ci.splitlines() if line.strip().startswith("python -m pytest")]
    assert len(commands) == 1, commands
    assert commands[0] == "python -m pytest -q -n auto"
    assert commands[0] in README.read_text(encoding="utf-8")


def test_readme_names_the_quick_tier_and_its_marker_is_registered():
    readme = README.read_text(encoding="utf-8")
    assert 'python -m pytest -m "not slow"' in readme
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^markers = \[[^\]]*"slow:', pyproject, flags=re.M), "the slow marker is not registered"


def test_readme_is_a_ten_minute_read():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move detail into docs/*.md"


def test_readme_links_every_docs_page():
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)(?:#[\w-]*)?\)", README.read_text(encoding="utf-8")))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages, "docs/ has no pages"
    assert pages - linked == set(), f"docs pages the README does not link: {sorted(pages - linked)}"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: markup dropped, lower case, punctuation removed, spaces
    to hyphens ("Compare (A/B)" -> "compare-ab")."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown page, with GitHub's -1, -2 suffixes for repeats."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose(text), flags=re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_slug_and_anchors_follow_github():
    assert slug("Compare (A/B)") == "compare-ab"
    assert slug("Long commands: progress, Ctrl-C and bounds") == "long-commands-progress-ctrl-c-and-bounds"
    assert slug("`run --json` figures") == "run---json-figures"
    assert anchors("# A\n## B\n```\n# not a heading\n```\n## B\n") == {"a", "b", "b-1"}


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _links() -> list[tuple[str, str]]:
    return [(page.relative_to(ROOT).as_posix(), target) for page in _pages()
            for target in LINK.findall(_prose(page.read_text(encoding="utf-8")))
            if not re.match(r"[a-z]+:", target)]


def test_pages_have_relative_links_to_check():
    """The link check below has something to check (the README links every page of docs/)."""
    assert len(_links()) > 20


@pytest.mark.parametrize("page,target", _links())
def test_every_relative_link_and_anchor_resolves(page, target):
    path, _, anchor = target.partition("#")
    dest = (ROOT / page).parent / path if path else ROOT / page
    assert dest.exists(), f"{page}: link to {target}: {dest.relative_to(ROOT)} does not exist"
    if anchor:
        assert dest.suffix == ".md", f"{page}: anchor on a file that is not Markdown: {target}"
        assert anchor in anchors(dest.read_text(encoding="utf-8")), \
            f"{page}: no heading #{anchor} in {path or page}"


# A path of this repository quoted in the prose: backticked, or any explorer/... path (sources such
# as "torchtitan docs/performance.md" are other repositories' paths and are not backticked).
QUOTED_PATH = re.compile(r"`((?:explorer|scenarios|bench|tests|docs)/[^`\s]*)`"
                         r"|(?<![\w/.-])(explorer/[\w/.*-]*[\w*/])")


def _quoted_paths() -> list[tuple[str, str]]:
    return sorted({(page.relative_to(ROOT).as_posix(), a or b) for page in _pages()
                   for a, b in QUOTED_PATH.findall(page.read_text(encoding="utf-8"))})


def test_every_quoted_repository_path_exists():
    """A module that moves takes its mentions with it (paths may use * as a glob)."""
    quoted = _quoted_paths()
    assert len(quoted) > 30
    missing = [f"{page}: {path}" for page, path in quoted if not list(ROOT.glob(path.rstrip("/")))]
    assert missing == [], "quoted paths that do not exist:\n" + "\n".join(missing)


def layout_map(readme: str) -> dict[str, str]:
    """The README's layout map as {path: description}: one entry per line of the fenced block after
    the ``<!-- layout map`` comment, two spaces of indentation per level, directories ending in /."""
    block = readme.split("<!-- layout map", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    entries: dict[str, str] = {}
    parents: list[str] = []
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name, _, description = line.strip().partition("  ")
        assert indent % 2 == 0 and indent // 2 <= len(parents), f"layout map: bad indentation: {line!r}"
        parents = parents[: indent // 2]
        assert not parents or parents[-1].endswith("/"), f"layout map: {name} nested under a file"
        path = "".join(parents) + name
        assert description.strip(), f"layout map: {path} has no description"
        assert path not in entries, f"layout map: {path} twice"
        entries[path] = description.strip()
        parents.append(name)
    return entries


def packages_and_modules(root: Path) -> set[str]:
    """What the layout map must name: every entry directly in explorer/ (modules and directories)
    and every package below it."""
    top = {p.relative_to(root).as_posix() + ("/" if p.is_dir() else "")
           for p in (root / "explorer").iterdir()
           if not p.name.startswith((".", "__pycache__")) and (p.is_dir() or p.suffix == ".py")}
    packages = {p.parent.relative_to(root).as_posix() + "/" for p in (root / "explorer").rglob("__init__.py")}
    return (top | packages) - {"explorer/"}


def test_layout_map_parses_nesting():
    block = "<!-- layout map -->\n```text\nexplorer/\n  a/   one\n    b/   two\n  c.py   three\n```\n"
    with pytest.raises(AssertionError, match="no description"):
        layout_map(block.replace("explorer/\n", "explorer/  the package\nlone.py\n"))
    assert layout_map(block.replace("explorer/\n", "explorer/  the package\n")) == {
        "explorer/": "the package", "explorer/a/": "one", "explorer/a/b/": "two", "explorer/c.py": "three"}


def test_layout_map_names_every_package_and_module(tmp_path):
    mapped = layout_map(README.read_text(encoding="utf-8"))
    omitted = sorted(packages_and_modules(ROOT) - set(mapped))
    assert omitted == [], (f"README's layout map omits {omitted}: add one line each under explorer/ "
                           "in README.md's layout map")
    # The comparison sees a package the map does not name (what the test is for).
    (tmp_path / "explorer" / "newpackage").mkdir(parents=True)
    (tmp_path / "explorer" / "newpackage" / "__init__.py").write_text("")
    (tmp_path / "explorer" / "newmodule.py").write_text("")
    assert packages_and_modules(tmp_path) - set(mapped) == {"explorer/newpackage/", "explorer/newmodule.py"}


def test_layout_map_names_nothing_that_does_not_exist():
    mapped = layout_map(README.read_text(encoding="utf-8"))
    assert len([p for p in mapped if p.startswith("explorer/")]) > 20
    gone = sorted(p for p in mapped if not (ROOT / p).exists() or (ROOT / p).is_dir() != p.endswith("/"))
    assert gone == [], f"README's layout map names what is not in the tree: {gone}"


def test_the_reference_example_lists_every_schedule():
    """The example's schedule comment names every registered schedule (it listed 9 of 15)."""
    from explorer.schedules import registry
    lines = REFERENCE.read_text(encoding="utf-8").splitlines()
    line = next(x for x in lines if x.strip().startswith("schedule:"))
    listed = {s.strip() for s in line.split("#", 1)[1].split("|")}
    assert listed == set(registry.names())


def test_the_pages_give_the_searchs_own_headroom_default():
    """A hunt found docs/design-space.md give `search --headroom-GB` a default of 3 GB; the CLI, its
    output and the app leave 1 GB (analysis/verdict.DEFAULT_HEADROOM_GB)."""
    from explorer.analysis.verdict import DEFAULT_HEADROOM_GB
    text = (ROOT / "docs" / "design-space.md").read_text(encoding="utf-8")
    said = re.findall(r"`--headroom-GB` to spare\s+\(default ([0-9.]+)", text)
    assert said and all(float(x) == DEFAULT_HEADROOM_GB for x in said)
