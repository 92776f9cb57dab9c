"""Policies: what an agent is. See base.py for the protocol and lm_policy.py for the LM policy."""
