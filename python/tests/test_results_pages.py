"""The results pages whose raw data is committed packed (docs/results/**/*.tar.xz): each page's
tables (or one section's, on a longer page) regenerate from the archive, byte for byte, with the
command the page names."""
import os
import pathlib
import subprocess
import sys

import pytest

SOURCE = pathlib.Path(os.environ.get("STRUCTDIFF_SOURCE_DIR",
                                     pathlib.Path(__file__).resolve().parents[2]))

# (page, the summary command). The page is its first line (what the tables are, and the command)
# and then the script's output; the figure is left out here. The seed-1 and seed-2 pages come from
# the same code as the first page (about a minute each: the paired bootstrap), so are left out.
PAGES = [
    ("docs/results/tracformer/study-both-seeds.md", ["scripts/tracformer_summary.py", "docs/results/tracformer/study.tar.xz"]),
    ("docs/results/tracformer/study-equal-time.md", ["scripts/tracformer_summary.py", "docs/results/tracformer/study.tar.xz", "--equal-time"]),
    ("docs/results/difformer-citation/table2.md", ["scripts/difformer_citation_summary.py", "docs/results/difformer-citation/table2.tar.xz"]),
]

# (page, the summary command) where one section of a longer page is the script's output: its
# lines, blank lines aside, stand on the page one after another, and the page names the script.
SECTIONS = [
    ("docs/results/unn.md", ["scripts/unn_ud_summary.py", "docs/results/unn/ud.tar.xz"]),
    ("docs/results/gsdm-bcmf.md", ["scripts/gsdm_bcmf_structure_summary.py", "docs/results/gsdm-bcmf/structure.tar.xz"]),
    ("docs/results/difformer.md", ["scripts/difformer_table9_summary.py", "docs/results/difformer-citation/table9.tar.xz"]),
    ("docs/results/gsdm-embeddings.md", ["scripts/gsdm_embeddings_summary.py", "docs/results/gsdm-embeddings.tar.xz"]),
]


def tables(text):
    return [line for line in text.splitlines() if line.strip() and not line.startswith("wrote ")]


def summary(command):
    return subprocess.run([sys.executable] + command, cwd=SOURCE, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("page, command", PAGES, ids=[pathlib.Path(p).stem for p, _ in PAGES])
def test_page_regenerates_from_its_packed_data(page, command):
    text = (SOURCE / page).read_text()
    assert " ".join(command[:2]) in text.splitlines()[0], "the page names its command"
    assert tables(summary(command)) == tables(text)[1:]


@pytest.mark.parametrize("page, command", SECTIONS,
                         ids=[f"{pathlib.Path(p).stem}-{pathlib.Path(c[0]).stem}" for p, c in SECTIONS])
def test_page_section_regenerates_from_its_packed_data(page, command):
    text = (SOURCE / page).read_text()
    assert command[0] in text, "the page names its script"
    output, lines = tables(summary(command)), tables(text)
    assert output, "the script printed tables"
    starts = [i for i, line in enumerate(lines) if line == output[0]]
    assert any(lines[i:i + len(output)] == output for i in starts), (
        "the script's output is not on the page as it stands:\n" + "\n".join(output))
