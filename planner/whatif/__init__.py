"""What-if questions asked of the solver session: sweeps, frontiers and explanations. Nothing
here builds a model."""
