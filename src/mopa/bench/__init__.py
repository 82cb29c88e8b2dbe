"""Speed benchmarks (``mopa bench ...``): measured on the code that ships."""
