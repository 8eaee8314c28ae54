"""How study M's stored names read in legends and ticks (issue 10: no raw ``G_no_mu`` or
``train_noisy`` on a figure), in SPEC M.3–M.4's words: FF's networks and the data subsets."""

NAMES = {"original": "original", "G": "G", "G_no_mu": "G without μ",
         "G_dc": "G with DC terms", "R": "R (residual)", "R_mu": "R with μ",
         "train_clean": "train (clean labels)", "train_noisy": "train (corrupted labels)",
         "test": "test", "train": "train"}
