"""The io tests' S3 fixtures (``s3_server``, ``s3_bucket``) live in ``tests/conftest.py``."""
