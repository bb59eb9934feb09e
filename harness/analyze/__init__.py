"""Reads records and computes: statistics, paired verdicts, labels, identity, round splits,
cost model, summaries. Runs nothing, prints nothing."""
