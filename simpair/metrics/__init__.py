"""Pure metric functions: scores and gold in, numbers out (scikit-learn and scipy underneath).

Beside the quality figures, `drift` holds the two-sample figures that monitoring compares traffic
with: PSI and Kolmogorov–Smirnov on binned counts, MMD and a domain classifier on vector samples.

The lowest floor above the foundation: training, ensembles, selection and evaluation all import it,
and it imports nothing of simpair above it, so a figure is computed one way everywhere.
"""
