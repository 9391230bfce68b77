"""What the engines that start Ringlet jobs share (ringlet.spark, ringlet.ray):
the ranks of a set of workers, the environment that makes each one a rank,
running a function in a rank's own process, and telling the failure that
ended a job from the failures it caused on the other ranks."""
