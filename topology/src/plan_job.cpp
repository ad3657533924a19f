#include "pipette/core/search.hpp"
#include "pipette/topology/job_planner.hpp"

#include "guarded.hpp"

namespace pipette {

Result<JobPlan> plan_job(const JobRequest& request, const SiteConfig& site) {
  return guarded("planning", std::string(), [&]() -> Result<JobPlan> {
    auto prepared = prepare_job(request, site);
    if (!prepared) return prepared.error();
    return search_prepared_job(std::move(*prepared));
  });
}

Result<JobPlan> search_prepared_job(PreparedJob job) {
  return guarded("planning", std::string(), [&]() -> Result<JobPlan> {
    auto searched = search_plans(job.model, job.training, job.cluster, job.options);
    if (!searched) return searched.error();
    JobPlan plan;
    plan.search = std::move(searched).value();
    plan.model = std::move(job.model);
    plan.training = std::move(job.training);
    plan.cluster = std::move(job.cluster);
    plan.links_assumed = std::move(job.links_assumed);
    plan.notes = std::move(job.notes);
    plan.measured_node_pairs = job.measured_node_pairs;
    plan.assumed_node_pairs = job.assumed_node_pairs;
    plan.calibration = std::move(job.calibration);
    plan.engine = std::move(job.engine);
    return plan;
  });
}

}  // namespace pipette
