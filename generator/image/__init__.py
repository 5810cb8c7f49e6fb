"""The project's images: plan, build (dependency image, then code), smoke-test, push."""
