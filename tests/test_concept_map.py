"""albert_tf/README.md: every file it names exists, and each idea of the
paper in its table points at one file and a place in the paper."""

import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(REPO, "albert_tf")
_LINK = re.compile(r"\]\(([^)#\s]+)\)")


def _readme():
    with open(os.path.join(FOLDER, "README.md"), encoding="utf-8") as f:
        return f.read()


def _table_rows(text):
    """`(idea, file cell, paper cell)` of each row of the concept table."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and _LINK.search(cells[1]):
            rows.append(tuple(cells))
    return rows


def test_every_linked_path_exists():
    links = _LINK.findall(_readme())
    assert len(links) > 20
    missing = [link for link in links
               if not os.path.exists(os.path.join(FOLDER, link))]
    assert missing == []


def test_each_idea_has_one_file_and_a_place_in_the_paper():
    rows = _table_rows(_readme())
    ideas = " ".join(idea for idea, _, _ in rows).lower()
    for concept in ("factorized embedding", "cross-layer", "shared-attention",
                    "shared-ffn", "not-shared", "sop", "n-gram", "lamb",
                    "schedule", "encoder", "pretrainer", "masked-lm head"):
        assert concept in ideas, concept
    for idea, file_cell, paper in rows:
        (path,) = _LINK.findall(file_cell)
        assert path.endswith(".py"), idea
        assert "§" in paper or "official code" in paper, idea
