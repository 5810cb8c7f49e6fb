{{ 'report' | module_source }}
