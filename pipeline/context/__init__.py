"""Context: token budgets, recall and formatting that build what the model sees for a reply."""
