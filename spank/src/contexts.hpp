#pragma once
// One entry point per Slurm context and callback, each in its own file, called by the dispatch
// in plugin.cpp. All return 0 or -1 as SPANK expects and never throw.
#include "slurm_api.hpp"

namespace pipette::spank {

int submission_init(spank_t sp, int argc, char** argv);      // submission.cpp (sbatch, salloc, srun)

int remote_init(spank_t sp, int argc, char** argv);          // remote_init.cpp (slurmstepd, root)
int remote_user_init(spank_t sp);                            // user_init.cpp (slurmstepd, job user)
int remote_task_init(spank_t sp);                            // task_init.cpp (each task, before exec)

int slurmd_init();                                           // slurmd.cpp

}  // namespace pipette::spank
