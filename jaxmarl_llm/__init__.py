"""jaxmarl_llm: multi-agent RL with language-model agents, as one compiled JAX program."""

__version__ = "0.1.0"
