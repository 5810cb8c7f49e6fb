{{ 'ranktable_node' | module_source }}
