"""Suite -> plan -> runner -> record: what runs, how, on which host, and what it wrote."""
