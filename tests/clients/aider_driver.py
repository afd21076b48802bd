"""Runs aider through its Python scripting API for several turns of one chat; executed by the
aider venv's own Python (never imported by pytest: ``aider`` lives only there).

Usage: ``python aider_driver.py SPEC.json`` where the spec holds ``base_url``, ``workdir``,
``window``, ``files`` (added to the chat) and ``messages`` (one ``coder.run`` each, in one
Coder: one conversation). The model is LiteLLM's ``openai/scripted`` at ``base_url/v1`` (Chat
Completions), registered with ``max_input_tokens = window`` as ``--model-metadata-file`` would
(aider sizes its own history summary from it). Edit format ``diff`` (SEARCH/REPLACE blocks); no
git, no auto-commits, no lint, no repo map, no shell suggestions, no URL detection. Exits 0 when
every turn ran, 1 when a turn raised.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    os.environ["OPENAI_API_BASE"] = f"{spec['base_url']}/v1"
    os.environ.setdefault("OPENAI_API_KEY", "dummy")
    from aider.coders import Coder
    from aider.io import InputOutput
    from aider.models import Model, register_litellm_models

    metadata = {
        "openai/scripted": {
            "max_input_tokens": spec["window"],
            "max_output_tokens": 4096,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump(metadata, out)
    register_litellm_models([out.name])
    model = Model("openai/scripted")
    io = InputOutput(yes=True, pretty=False, fancy_input=False)
    os.chdir(spec["workdir"])
    coder = Coder.create(
        main_model=model,
        edit_format="diff",
        io=io,
        fnames=spec["files"],
        use_git=False,
        auto_commits=False,
        dirty_commits=False,
        auto_lint=False,
        map_tokens=0,
        stream=True,
        suggest_shell_commands=False,
        detect_urls=False,
    )
    for message in spec["messages"]:
        coder.run(with_message=message)
        print(json.dumps({"turn": message[:40], "edited": sorted(coder.aider_edited_files or [])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
