"""Write the settings table of docs/configuration.md from the fields' declarations.

    python docs/_ext/settings_table.py          # rewrite the table in the page
    python docs/_ext/settings_table.py --check  # exit 1 when the page's table is stale

The table sits between the two markers below; everything else on the page is written by
hand. tests/test_settings_docs.py fails when the page and the declarations disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from yggdrasil.loki.settings import settings_table  # noqa: E402

PAGE = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- the settings table: made by docs/_ext/settings_table.py from the declarations -->"
END = "<!-- end of the settings table -->"


def with_table(page: str) -> str:
    """The page with its table made again (ValueError when a marker is missing)."""
    head, found, rest = page.partition(BEGIN)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(f"{PAGE} needs the markers {BEGIN!r} and {END!r}")
    return f"{head}{BEGIN}\n\n{settings_table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    page = PAGE.read_text()
    made = with_table(page)
    if "--check" in argv:
        return 0 if made == page else 1
    PAGE.write_text(made)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
