"""The Spark pipeline: export from the store, transform on Spark, load the results back."""
