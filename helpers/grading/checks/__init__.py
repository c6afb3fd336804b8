"""Checkers for the exercises, one module per notebook (``exNN.py``); see ``helpers.grading.exercises``."""
