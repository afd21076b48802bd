"""Runs mini-swe-agent on one task through its Python API; executed by the mini-swe-agent venv's
own Python (never imported by pytest: it needs ``minisweagent``, which lives only there).

Usage: ``python mswea_driver.py BASE_URL WORKDIR TASK``. The model is LiteLLM's
``openai/scripted`` at ``BASE_URL/v1`` (Chat Completions with mini-swe-agent's one ``bash``
tool); the agent config is the package's ``mini.yaml`` (its ``agent`` section), with the
``confirm`` mode and the cost limit turned off. Prints the agent's exit status as JSON on the
last line, and exits 0 when the task was submitted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel


def main(base_url: str, workdir: str, task: str) -> int:
    config = yaml.safe_load(Path(package_dir / "config" / "mini.yaml").read_text())
    agent_config = {
        k: v for k, v in config["agent"].items() if k not in ("mode", "cost_limit", "step_limit")
    }
    model = LitellmModel(
        model_name="openai/scripted",
        model_kwargs={"api_base": f"{base_url}/v1", "api_key": "dummy", "drop_params": True},
        cost_tracking="ignore_errors",
    )
    agent = DefaultAgent(
        model, LocalEnvironment(cwd=workdir, timeout=60), **agent_config, step_limit=60
    )
    result = agent.run(task)
    print(json.dumps({"exit_status": result.get("exit_status"), "calls": agent.n_calls}))
    return 0 if result.get("exit_status") == "Submitted" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
