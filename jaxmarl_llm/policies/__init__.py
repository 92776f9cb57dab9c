"""Policies: what an agent is. lm_policy.py is the LM policy (sampling, scoring, adapters), candidates.py the
constrained and scored replies, transcripts.py the KV-cache rows of incremental rollouts, central_critic.py MAPPO's
critic."""
