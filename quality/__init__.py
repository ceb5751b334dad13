"""Measuring what a receiving browser shows: frame codes, video checks, BRISQUE, full-reference
scores, delay and playback statistics."""
