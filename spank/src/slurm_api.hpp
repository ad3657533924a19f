#pragma once
// Slurm's C headers. Slurm 22.05's spank.h declares most functions without C linkage guards, so
// they must be included as C. Nothing here is linked: slurmstepd, slurmd, srun and sbatch export
// these symbols and the plugin resolves them when it is loaded.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}
