"""TinySeg: a very small patch-transformer for semantic segmentation."""
