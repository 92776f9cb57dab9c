"""Multi-agent particle worlds, numerically matching the `mpe2` package.

physics.py  the world core (actions -> forces, contacts, integration), pure array functions
base.py     MPEState, params and the shared reset/step loop
simple_spread / simple_tag / simple_reference / simple_speaker_listener: the scenarios
"""

from jaxmarl_llm.envs.mpe.base import MPEEnv, MPELocalRatioParams, MPEParams, MPEState
from jaxmarl_llm.envs.mpe.simple_reference import SimpleReference
from jaxmarl_llm.envs.mpe.simple_speaker_listener import SimpleSpeakerListener
from jaxmarl_llm.envs.mpe.simple_spread import SimpleSpread
from jaxmarl_llm.envs.mpe.simple_tag import SimpleTag

__all__ = ["MPEEnv", "MPEParams", "MPELocalRatioParams", "MPEState", "SimpleSpread", "SimpleTag", "SimpleReference", "SimpleSpeakerListener"]
