{{ 'ranktable_rules' | module_source }}
