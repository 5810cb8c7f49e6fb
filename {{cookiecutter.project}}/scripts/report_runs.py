{{ 'report_runs' | module_source }}
