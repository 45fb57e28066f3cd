"""Pure metric functions: scores and gold in, numbers out (scikit-learn and scipy underneath).

The lowest floor above the foundation: training, ensembles, selection and evaluation all import it,
and it imports nothing of simpair above it, so a figure is computed one way everywhere.
"""
