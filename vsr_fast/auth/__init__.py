"""Who is calling and how much they may: client keys, the identity sources, rate limits and budgets."""
