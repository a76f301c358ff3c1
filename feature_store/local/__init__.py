"""fstrain package."""
