"""Statistics as pure functions on arrays: nothing here reads files, prints or words.

- ``describe``: the statistics of a sample (``STATISTICS``) and percentile names;
- ``moments``: the order-independent mean and std every report uses (exact for ns);
- ``ratio``: the ratio ``candidate / baseline`` with its interval (``RatioCI``);
- ``bootstrap``: bootstrap intervals of that ratio, paired or not;
- ``clusters``: the design effect (effective sample size) of clustered samples;
- ``rates``: the compound-Poisson interval of a ratio of rates or counts;
- ``rank_tests``: Wilcoxon signed-rank and Mann-Whitney U of whole distributions;
- ``verdicts``: whether a ratio is a significant change, and in which direction.

Import from the module that does the job (``from servetrace.stats.describe import
describe``): this package exports nothing, so using ``describe`` never imports scipy.
"""
