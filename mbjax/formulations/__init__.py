"""The seed papers' formulations of the equations of motion, each beside the recursive ones."""
