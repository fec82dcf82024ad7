"""The recipes of deploy/README.md as the tests run them: each fenced block marked `<!-- recipe: NAME -->`."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.harness import REPO_ROOT

DEPLOY_README = REPO_ROOT / "deploy" / "README.md"
#: Steps every checkout recipe shares, in order: the path variables, the install, the state directory.
SHARED_RECIPES = ("variables", "install", "state")
#: The demo agent to try the recipes with (a server in the foreground, as the hosts).
DEMO_RECIPE = "demo-agent"
#: The demo agent's token in the README (any value the operator chooses, written in two places).
DEMO_TOKEN = "demo-token"
#: The hosts: each block ends in its server, running in the foreground.
HOST_RECIPES = ("gunicorn", "gunicorn-gthread", "gunicorn-sync", "waitress", "uwsgi")
#: The marker, then (after blank lines only) a fenced shell block: its body is the recipe.
RECIPE_BLOCK = re.compile(r"^<!-- recipe: ([a-z0-9-]+) -->\n(?:[ \t]*\n)*```sh\n(.*?)^```[ \t]*$", re.M | re.S)
RECIPE_MARKER = re.compile(r"^<!-- recipe: ([a-z0-9-]+) -->", re.M)


def recipe_blocks(markdown: str) -> dict[str, str]:
    """NAME -> the block's text, exactly as written; a marker without its block or a repeated name raises."""
    blocks: dict[str, str] = {}
    for match in RECIPE_BLOCK.finditer(markdown):
        name, body = match.group(1), match.group(2)
        if name in blocks:
            raise ValueError(f"recipe {name!r} is marked twice")
        blocks[name] = body
    unpaired = sorted(set(RECIPE_MARKER.findall(markdown)) - set(blocks))
    if unpaired:
        raise ValueError(f"recipe marker(s) not followed by a ```sh block: {unpaired}")
    return blocks


def deploy_recipes(readme: Path = DEPLOY_README) -> dict[str, str]:
    return recipe_blocks(readme.read_text(encoding="utf-8"))
