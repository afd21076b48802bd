"""contextfold inside the agent frameworks people already use, one module per framework.

- :mod:`contextfold.integrations.openai_agents`: the OpenAI Agents SDK (extra ``[agents]``);
- :mod:`contextfold.integrations.langchain`: LangChain v1 ``create_agent`` (extra ``[langchain]``);
- :mod:`contextfold.integrations.pydantic_ai`: pydantic-ai (extra ``[pydantic-ai]``).

Each module imports its framework when it is imported, so this package imports none of them:
``import contextfold.integrations`` works whatever is installed.
"""

from __future__ import annotations

__all__: list[str] = []
